package pipeline

import (
	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/testkit/frames"
)

// The frames and bodies the tests send and answer with.
var (
	frame        = frames.Frame
	queryBody    = frames.QueryBody
	voidBody     = frames.VoidBody
	executeFrame = frames.ExecuteFrame
	rowsBody     = frames.RowsBody
	localColumns = frames.LocalColumns
	ip           = frames.IP
	port         = frames.Port
	text         = frames.Text
)

var nopLogger = zerolog.Nop()
