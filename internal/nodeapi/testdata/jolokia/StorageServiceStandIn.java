// StorageServiceStandIn serves a stand-in for Cassandra's StorageService MBean through a
// real Jolokia agent (Debian's libjolokia-core-java, its HttpRequestHandler behind the JDK's
// own HTTP server), so that tracecar's Jolokia adapter is tested against Jolokia itself.
// It prints "LISTENING <port>" once it serves http://127.0.0.1:<port>/jolokia, and exits
// when its standard input closes.
import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import javax.management.ObjectName;
import org.jolokia.backend.BackendManager;
import org.jolokia.config.ConfigKey;
import org.jolokia.config.Configuration;
import org.jolokia.http.HttpRequestHandler;
import org.jolokia.util.LogHandler;
import org.json.simple.JSONAware;

public class StorageServiceStandIn {
    /** The part of Cassandra's StorageServiceMBean that tracecar uses, with its signatures. */
    public interface StorageServiceMBean {
        void setTraceProbability(double probability);
        double getTraceProbability();
        Map<String, String> getLoggingLevels();
        void setLoggingLevel(String classQualifier, String level) throws Exception;
    }

    public static class StorageService implements StorageServiceMBean {
        private volatile double traceProbability;
        private final Map<String, String> levels = new TreeMap<>();

        StorageService() {
            levels.put("ROOT", "INFO");
            levels.put("org.apache.cassandra", "INFO");
        }

        public void setTraceProbability(double probability) { traceProbability = probability; }
        public double getTraceProbability() { return traceProbability; }
        public synchronized Map<String, String> getLoggingLevels() { return new TreeMap<>(levels); }
        public synchronized void setLoggingLevel(String classQualifier, String level) throws Exception {
            switch (level) {
                case "TRACE": case "DEBUG": case "INFO": case "WARN": case "ERROR": case "OFF": break;
                default: throw new IllegalArgumentException("invalid level " + level);
            }
            levels.put(classQualifier, level);
        }
    }

    public static void main(String[] args) throws Exception {
        ManagementFactory.getPlatformMBeanServer().registerMBean(new StorageService(),
            new ObjectName("org.apache.cassandra.db:type=StorageService"));
        LogHandler quiet = new LogHandler() {
            public void debug(String m) {}
            public void info(String m) {}
            public void error(String m, Throwable t) { System.err.println(m); }
        };
        Configuration cfg = new Configuration(ConfigKey.AGENT_ID, "tracecar-standin");
        HttpRequestHandler handler = new HttpRequestHandler(cfg, new BackendManager(cfg, quiet), quiet);
        HttpServer srv = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        srv.createContext("/jolokia", ex -> {
            JSONAware answer;
            try {
                Map<String, String[]> params = new HashMap<>();
                if (ex.getRequestMethod().equals("POST")) {
                    answer = handler.handlePostRequest(ex.getRequestURI().toString(), ex.getRequestBody(), "utf-8", params);
                } else {
                    String path = ex.getRequestURI().getPath().substring("/jolokia".length());
                    answer = handler.handleGetRequest(ex.getRequestURI().toString(), path, params);
                }
            } catch (Throwable t) {
                answer = handler.handleThrowable(t);
            }
            byte[] body = answer.toJSONString().getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "text/plain;charset=utf-8");
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream out = ex.getResponseBody()) { out.write(body); }
        });
        srv.start();
        System.out.println("LISTENING " + srv.getAddress().getPort());
        System.out.flush();
        while (System.in.read() >= 0) { }
        System.exit(0);
    }
}
