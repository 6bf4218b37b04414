package causet.conformance;

import eu.antidotedb.client.AntidoteException;
import eu.antidotedb.client.messages.AntidoteResponse;
import org.junit.jupiter.api.function.Executable;

import java.util.Locale;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * How the Java client (0.1.0) surfaces the server's two kinds of error replies (docs/protocol.md, "Errors"):
 * <ul>
 *   <li>{@code ApbErrorResp} (code 0, a message): the client's reply extractor does not expect it and throws
 *   {@link AntidoteResponse.ExtractionError} (a RuntimeException, not an AntidoteException) whose message is
 *   "... Unexpected message: errmsg: "...", errcode: N";</li>
 *   <li>a typed reply with {@code success = false}: {@link AntidoteException} with the error code, e.g. "Failed to
 *   commit transaction (Error code: 3)" or "Could not perform update (error code: 3)".</li>
 * </ul>
 */
public final class Expect {
    private Expect() {
    }

    /** {@code action} fails with the server's ApbErrorResp whose text contains every fragment (case-insensitive). */
    public static String serverError(Executable action, String... fragments) {
        AntidoteResponse.ExtractionError e = assertThrows(AntidoteResponse.ExtractionError.class, action,
                "expected the server's ApbErrorResp");
        String message = e.getMessage();
        assertTrue(message.contains("errmsg:"), () -> "not an ApbErrorResp: " + message);
        assertTrue(message.contains("errcode:"), () -> "not an ApbErrorResp: " + message);
        for (String f : fragments) {
            assertTrue(message.toLowerCase(Locale.ROOT).contains(f.toLowerCase(Locale.ROOT)),
                    () -> "error message lacks \"" + f + "\": " + message);
        }
        return message;
    }

    /** {@code action} fails with a typed failure reply carrying {@code code}, which the client turns into an
     *  AntidoteException naming the code. */
    public static AntidoteException typedFailure(Executable action, int code) {
        AntidoteException e = assertThrows(AntidoteException.class, action, "expected a typed failure");
        String message = String.valueOf(e.getMessage()).toLowerCase(Locale.ROOT);
        assertTrue(message.contains("code: " + code + ")"), () -> "expected error code " + code + ": " + e);
        return e;
    }

    /** {@code action} fails in some way the client reports (an error reply of either kind, or a client error). */
    public static RuntimeException anyError(Executable action) {
        try {
            action.execute();
        } catch (RuntimeException e) {
            return e;
        } catch (Throwable t) {
            fail("unexpected " + t, t);
        }
        return fail("expected an error");
    }
}
