package causet.conformance;

import org.junit.jupiter.api.extension.ExtendWith;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * A test class that runs against one {@code causet start} server of its own, started before its first test and
 * stopped (SIGTERM, then SIGKILL) after its last. Test methods take an {@link Env} parameter.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@ExtendWith(CausetExtension.class)
public @interface WithCauset {
    /** Extra arguments for the class's server, e.g. {@code --certify-writes}. */
    String[] args() default {};
}
