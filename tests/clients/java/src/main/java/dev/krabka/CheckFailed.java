package dev.krabka;

/** A check did not hold: the broker's behaviour differs from what is expected. */
final class CheckFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CheckFailed(String message) {
        super(message);
    }

    CheckFailed(String message, Throwable cause) {
        super(message, cause);
    }
}
