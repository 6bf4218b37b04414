package causet.conformance;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * One {@code causet start} process on free loopback ports with its own data directory and log file.
 *
 * <p>The binary is the system property {@code causet.bin} (run.sh sets it from {@code CAUSET_BIN} or its own build);
 * without it, {@code target/debug/causet} under the workspace (or {@code $CARGO_TARGET_DIR}). Servers are started
 * bounded in time (ready once the client port accepts connections and {@code /health} answers "ok") and stopped with
 * SIGTERM, then SIGKILL after 15 s. A JVM shutdown hook kills any server still running, and each server's pid is
 * written to {@code $causet.workdir/pids} so that run.sh can stop leftovers of a JVM that was killed outright.
 */
public final class CausetServer implements AutoCloseable {
    static final String HOST = "127.0.0.1";
    static final Duration START_TIMEOUT = Duration.ofSeconds(60);
    static final Duration STOP_TIMEOUT = Duration.ofSeconds(15);

    private static final Set<CausetServer> RUNNING = ConcurrentHashMap.newKeySet();
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (CausetServer s : RUNNING) {
                s.process.destroyForcibly();
            }
        }, "causet-server-reaper"));
    }

    private final Path dataDir;
    private final Path logFile;
    private final List<String> extraArgs;
    private Process process;
    private int port;
    private int adminPort;

    private CausetServer(Path dataDir, Path logFile, List<String> extraArgs) {
        this.dataDir = dataDir;
        this.logFile = logFile;
        this.extraArgs = List.copyOf(extraArgs);
    }

    /** Starts a server with a fresh data directory under a new directory named after {@code name}. */
    public static CausetServer start(String name, List<String> extraArgs) {
        Path dir = newWorkDir(name);
        return start(dir.resolve("data"), dir.resolve("causet.log"), extraArgs);
    }

    /** Starts a server on the given data directory (which may hold an earlier server's data). */
    public static CausetServer start(Path dataDir, Path logFile, List<String> extraArgs) {
        CausetServer s = new CausetServer(dataDir, logFile, extraArgs);
        s.startProcess();
        return s;
    }

    public static Path binary() {
        String explicit = System.getProperty("causet.bin", "");
        if (explicit.isEmpty()) {
            explicit = System.getenv().getOrDefault("CAUSET_BIN", "");
        }
        if (!explicit.isEmpty()) {
            return Path.of(explicit).toAbsolutePath();
        }
        Path workspace = Path.of(System.getProperty("user.dir")).resolve("../..").normalize();
        String targetEnv = System.getenv().getOrDefault("CARGO_TARGET_DIR", "");
        Path target = targetEnv.isEmpty() ? workspace.resolve("target") : workspace.resolve(targetEnv);
        return target.resolve("debug").resolve("causet");
    }

    static Path workRoot() {
        String configured = System.getProperty("causet.workdir", "");
        try {
            Path root = configured.isEmpty()
                    ? Path.of(System.getProperty("java.io.tmpdir"), "causet-conformance-java")
                    : Path.of(configured);
            Files.createDirectories(root);
            return root;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Path newWorkDir(String name) {
        try {
            String safe = name.replaceAll("[^A-Za-z0-9_.-]+", "_");
            return Files.createTempDirectory(workRoot(), safe.substring(0, Math.min(60, safe.length())) + "-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A loopback port that was free a moment ago (bound to port 0, then closed). */
    public static int freePort() {
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(false);
            s.bind(new InetSocketAddress(HOST, 0));
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void startProcess() {
        Path bin = binary();
        if (!Files.isExecutable(bin)) {
            throw new IllegalStateException("no causet binary at " + bin
                    + ": run conformance/java/run.sh (it builds one) or set CAUSET_BIN");
        }
        try {
            Files.createDirectories(logFile.getParent());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        for (int attempt = 0; attempt < 5; attempt++) {
            port = freePort();
            adminPort = freePort();
            if (port == adminPort) {
                continue;
            }
            List<String> args = new ArrayList<>(List.of(bin.toString(), "start",
                    "--data-dir", dataDir.toString(),
                    "--client-bind", HOST + ":" + port,
                    "--admin-bind", HOST + ":" + adminPort));
            args.addAll(extraArgs);
            appendLog("$ " + String.join(" ", args) + "\n");
            ProcessBuilder pb = new ProcessBuilder(args)
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()))
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
            pb.environment().put("NO_COLOR", "1");
            try {
                process = pb.start();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot start " + bin, e);
            }
            RUNNING.add(this);
            recordPid();
            if (waitReady()) {
                return;
            }
            stop();
            // Another process may have taken a port between our probe and the server's bind: try other ports.
            if (!log().contains("in use")) {
                break;
            }
        }
        throw new IllegalStateException("causet did not start serving within " + START_TIMEOUT.toSeconds()
                + " s; its log:\n" + logTail(4000));
    }

    private void recordPid() {
        try {
            Files.writeString(workRoot().resolve("pids"), process.pid() + "\n", StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            // Only a help for run.sh's clean-up; the shutdown hook and stop() still apply.
        }
    }

    private boolean waitReady() {
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                return false;
            }
            if (portOpen(HOST, port) && "ok".equals(httpGetOrNull("/health"))) {
                return true;
            }
            sleep(50);
        }
        return false;
    }

    static boolean portOpen(String host, int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 500);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private String httpGetOrNull(String path) {
        try {
            return httpGet(path).trim();
        } catch (IOException e) {
            return null;
        }
    }

    /** GET on the admin port; the body of a 200 reply. */
    public String httpGet(String path) throws IOException {
        HttpRequest req = HttpRequest.newBuilder(URI.create(adminUrl() + path)).timeout(Duration.ofSeconds(5)).build();
        try {
            HttpResponse<String> resp = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
            if (resp.statusCode() != 200) {
                throw new IOException("GET " + path + ": HTTP " + resp.statusCode());
            }
            return resp.body();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(e);
        }
    }

    public String host() {
        return HOST;
    }

    public int port() {
        return port;
    }

    public InetSocketAddress address() {
        return new InetSocketAddress(HOST, port);
    }

    public String adminUrl() {
        return "http://" + HOST + ":" + adminPort;
    }

    public Path dataDir() {
        return dataDir;
    }

    public Path logFile() {
        return logFile;
    }

    public boolean isAlive() {
        return process != null && process.isAlive();
    }

    public long pid() {
        return process.pid();
    }

    /** SIGTERM, then SIGKILL after 15 s. Returns the exit status, or -1 if the server was never started. */
    public int stop() {
        Process p = process;
        if (p == null) {
            return -1;
        }
        try {
            if (p.isAlive()) {
                p.destroy(); // SIGTERM on Linux
                if (!p.waitFor(STOP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
                    p.destroyForcibly();
                    p.waitFor(STOP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                }
            }
            return p.exitValue();
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            return -1;
        } catch (IllegalThreadStateException e) {
            return -1;
        } finally {
            RUNNING.remove(this);
        }
    }

    @Override
    public void close() {
        stop();
    }

    public String log() {
        try {
            return Files.readString(logFile, StandardCharsets.UTF_8);
        } catch (IOException | UncheckedIOException e) {
            return "";
        }
    }

    public String logTail(int chars) {
        String log = log();
        return log.length() <= chars ? log : log.substring(log.length() - chars);
    }

    private void appendLog(String text) {
        try {
            Files.writeString(logFile, text, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                    StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    @Override
    public String toString() {
        return "causet on " + HOST + ":" + port + " (admin " + adminPort + ", log " + logFile + ")";
    }
}
