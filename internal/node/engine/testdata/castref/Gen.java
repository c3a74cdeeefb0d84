// Reference values for internal/node's CAST between numeric types (TestCastNarrowingJava):
// Cassandra 4.1's CastFcts converts with java.lang.Number's byteValue, shortValue, intValue,
// longValue, floatValue and doubleValue, BigDecimal.valueOf(doubleValue()) for decimal and
// BigInteger.valueOf(longValue()) for varint. This program applies those very methods and
// writes each input and result serialized as Cassandra does (big-endian; decimal a 4-byte
// scale and the unscaled BigInteger's toByteArray; varint toByteArray), in hex; "null" where
// Java throws (NaN or infinity to decimal).
//
// The decimals go through Double.toString, whose digits are JDK 19's (JDK-4511638: the
// shortest that read back; Java 8 to 18 print a 17th digit for some doubles, such as
// 4.6116860184273879E18 for 2^62, where the node and JDK 19+ print 4.611686018427388E18).
// Regenerate with a JDK 19 or later:
//   java internal/node/testdata/castref/Gen.java > internal/node/testdata/castref/cases.json
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

public class Gen {
    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }

    static byte[] ser(String type, Number n) {
        switch (type) {
            case "tinyint": return new byte[]{n.byteValue()};
            case "smallint": return ByteBuffer.allocate(2).putShort(n.shortValue()).array();
            case "int": return ByteBuffer.allocate(4).putInt(n.intValue()).array();
            case "bigint": case "counter": return ByteBuffer.allocate(8).putLong(n.longValue()).array();
            case "float": return ByteBuffer.allocate(4).putFloat(n.floatValue()).array();
            case "double": return ByteBuffer.allocate(8).putDouble(n.doubleValue()).array();
            case "varint": return ((BigInteger) n).toByteArray();
            case "decimal": {
                BigDecimal d = (BigDecimal) n;
                byte[] u = d.unscaledValue().toByteArray();
                return ByteBuffer.allocate(4 + u.length).putInt(d.scale()).put(u).array();
            }
        }
        throw new IllegalArgumentException(type);
    }

    static final String[] TARGETS = {"tinyint", "smallint", "int", "bigint", "float", "double", "decimal", "varint"};

    static Number cast(String to, Number p) {
        switch (to) {
            case "tinyint": return p.byteValue();
            case "smallint": return p.shortValue();
            case "int": return p.intValue();
            case "bigint": return p.longValue();
            case "float": return p.floatValue();
            case "double": return p.doubleValue();
            case "decimal": return BigDecimal.valueOf(p.doubleValue());
            case "varint": return BigInteger.valueOf(p.longValue());
        }
        throw new IllegalArgumentException(to);
    }

    static List<String> out = new ArrayList<>();

    static void add(String type, Number v) {
        StringBuilder s = new StringBuilder();
        s.append("  {\"type\": \"").append(type).append("\", \"value\": \"").append(v)
         .append("\", \"bytes\": \"").append(hex(ser(type, v))).append("\", \"casts\": {");
        boolean first = true;
        for (String to : TARGETS) {
            if (to.equals(type) || (type.equals("counter") && to.equals("bigint"))) continue;
            String r;
            try {
                r = "\"" + hex(ser(to, cast(to, v))) + "\"";
            } catch (NumberFormatException e) {
                r = "null";
            }
            s.append(first ? "" : ", ").append("\"").append(to).append("\": ").append(r);
            first = false;
        }
        out.add(s.append("}}").toString());
    }

    public static void main(String[] args) {
        long two31 = 1L << 31, two32 = 1L << 32;
        long[] longs = {two31 - 1, two31, two31 + 1, two32 - 1, two32, two32 + 5, two32 + 255, 3 * two31, 3 * two31 + 128,
            (1L << 53) + 1, (1L << 62), (1L << 62) + (1L << 31) + 32768, Long.MAX_VALUE, Long.MAX_VALUE - 127,
            -two31, -two31 - 1, -two32 - 1, -(1L << 53) - 3, Long.MIN_VALUE, Long.MIN_VALUE + 1, 0x7ffffffffffffff0L,
            0x123456789abcdef0L, -0x123456789abcdef0L};
        for (long l : longs) add("bigint", l);
        add("counter", two31 + 7);
        add("counter", Long.MIN_VALUE + 129);
        for (int i : new int[]{Integer.MAX_VALUE, Integer.MIN_VALUE, 65537, -32769, 32768, 128, -129, 16777217})
            add("int", i);
        add("smallint", (short) -32768);
        add("smallint", (short) 32767);
        add("tinyint", (byte) -128);
        BigInteger two63 = BigInteger.ONE.shiftLeft(63), two64 = BigInteger.ONE.shiftLeft(64);
        BigInteger[] bigs = {two63, two63.add(BigInteger.ONE), two63.negate().subtract(BigInteger.ONE), two64,
            two64.add(BigInteger.valueOf(two31 + 7)), BigInteger.ONE.shiftLeft(100).add(BigInteger.valueOf(3)),
            BigInteger.ONE.shiftLeft(100).negate().subtract(BigInteger.valueOf(5)), BigInteger.valueOf(two31),
            BigInteger.valueOf(Long.MIN_VALUE), new BigInteger("-18446744073709551617")};
        for (BigInteger b : bigs) add("varint", b);
        String[] decs = {"2147483648.9", "-2147483649.5", "9223372036854775807.5", "9223372036854775808.25",
            "1.8446744073709551617E+19", "1E+20", "12345678901234567890123E-3", "-9.3E+18", "1E-5", "4294967296.75",
            "-0.5", "3.000000000E+9"};
        for (String d : decs) add("decimal", new BigDecimal(d));
        double[] doubles = {2147483648.0, 2147483647.5, -2147483648.9, -2147483649.0, 3e9, 9.223372036854775807E18,
            Math.nextDown(9.223372036854775807E18), -9.223372036854775808E18, Math.nextDown(-9.223372036854775808E18),
            1e19, -1e19, 1e300, Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, 4294967296.5, 1.5, -0.0,
            32767.9, 32768.5, -129.9, 255.5, 9007199254740993.0, Double.MIN_VALUE};
        for (double d : doubles) add("double", d);
        float[] floats = {2.1474836E9f, 3e9f, 9.223372E18f, 1e19f, -1e19f, Float.NaN, Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY, 16777217f, 65536.5f, -2.1474839E9f, 0.1f, Float.MIN_VALUE, 3.4028235E38f};
        for (float f : floats) add("float", f);
        System.out.println("{\"generator\": \"Gen.java on Java " + System.getProperty("java.version") + "\", \"cases\": [");
        System.out.println(String.join(",\n", out));
        System.out.println("]}");
    }
}
