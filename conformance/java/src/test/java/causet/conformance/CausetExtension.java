package causet.conformance;

import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;

import java.util.List;

/**
 * Starts the class's server ({@link WithCauset}), gives each test an {@link Env} (its own bucket names, its clients,
 * extra servers) that is closed when the test ends, and adds the servers' log tails to a failing test's report.
 */
public final class CausetExtension implements BeforeAllCallback, ParameterResolver, TestExecutionExceptionHandler {
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(CausetExtension.class);

    /** The class's server, stopped when the class's store is closed (after its last test). */
    private record ClassServer(CausetServer server) implements ExtensionContext.Store.CloseableResource {
        @Override
        public void close() {
            server.stop();
        }
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        Class<?> cls = context.getRequiredTestClass();
        WithCauset config = cls.getAnnotation(WithCauset.class);
        List<String> args = config == null ? List.of() : List.of(config.args());
        CausetServer server = CausetServer.start(cls.getSimpleName(), args);
        context.getStore(NS).put(ClassServer.class, new ClassServer(server));
    }

    private static CausetServer classServer(ExtensionContext context) {
        ClassServer cs = context.getStore(NS).get(ClassServer.class, ClassServer.class);
        if (cs == null) {
            throw new IllegalStateException("no server: annotate the test class with @WithCauset");
        }
        return cs.server();
    }

    @Override
    public boolean supportsParameter(ParameterContext parameterContext, ExtensionContext extensionContext) {
        return parameterContext.getParameter().getType() == Env.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameterContext, ExtensionContext context) {
        return context.getStore(NS).getOrComputeIfAbsent(Env.class,
                k -> new Env(classServer(context), context.getRequiredTestMethod().getName()), Env.class);
    }

    @Override
    public void handleTestExecutionException(ExtensionContext context, Throwable throwable) throws Throwable {
        StringBuilder logs = new StringBuilder();
        Env env = context.getStore(NS).get(Env.class, Env.class);
        List<CausetServer> servers = env != null ? env.servers() : List.of(classServer(context));
        for (CausetServer s : servers) {
            logs.append("\n--- ").append(s).append(", last lines ---\n").append(s.logTail(3000));
        }
        throwable.addSuppressed(new ServerLog(logs.toString()));
        throw throwable;
    }

    /** Carries the servers' log tails in a failing test's report. */
    static final class ServerLog extends Exception {
        private static final long serialVersionUID = 1L;

        ServerLog(String message) {
            super(message, null, false, false);
        }
    }
}
