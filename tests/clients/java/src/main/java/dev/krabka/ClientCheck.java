package dev.krabka;

import java.util.Locale;
import java.util.concurrent.ExecutionException;

/**
 * Black-box checks of a Kafka-compatible broker with the official Java client.
 *
 * <pre>
 *   produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC
 *   consume BOOTSTRAP TOPIC PARTITIONS COUNT
 *   admin   BOOTSTRAP
 *   transactions BOOTSTRAP TOPIC PARTITIONS
 *   transactions-hang BOOTSTRAP TOPIC PARTITIONS TIMEOUT_MS
 *   transactions-commit-on-cue BOOTSTRAP TOPIC PARTITIONS
 *   streams-count BOOTSTRAP INPUT OUTPUT APP_ID STATE_DIR
 *   word-count BOOTSTRAP INPUT OUTPUT APP_ID STATE_DIR
 *   streams-bench BOOTSTRAP INPUT OUTPUT APP_ID STATE_DIR RECORDS
 *   group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE [IDLE_EXIT_SECONDS]
 * </pre>
 *
 * Each subcommand prints one JSON line to stdout and exits 0 when every check holds; on a
 * failed check or any client error it prints "client-check SUBCOMMAND: FAIL: ..." to stderr
 * and exits 1. Usage errors exit 2. group-member runs until SIGTERM or idle (see GroupMember)
 * and prints {"member":ID,"consumed":N} however it ends.
 */
public final class ClientCheck {
    private static final String USAGE = String.join("\n",
            "usage: client-check produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC",
            "       client-check consume BOOTSTRAP TOPIC PARTITIONS COUNT",
            "       client-check admin BOOTSTRAP",
            "       client-check transactions BOOTSTRAP TOPIC PARTITIONS",
            "       client-check transactions-hang BOOTSTRAP TOPIC PARTITIONS TIMEOUT_MS",
            "       client-check transactions-commit-on-cue BOOTSTRAP TOPIC PARTITIONS",
            "       client-check streams-count BOOTSTRAP INPUT OUTPUT APP_ID STATE_DIR",
            "       client-check word-count BOOTSTRAP INPUT OUTPUT APP_ID STATE_DIR",
            "       client-check streams-bench BOOTSTRAP INPUT OUTPUT APP_ID STATE_DIR RECORDS",
            "       client-check group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE [IDLE_EXIT_SECONDS]",
            "PROTOCOL: classic | consumer",
            "CODEC: none | gzip | snappy | lz4 | zstd");

    private ClientCheck() {}

    public static void main(String[] args) {
        String sub = args.length > 0 ? args[0] : "";
        if (sub.equals("group-member")) {
            groupMember(args);
            return;
        }
        if (sub.equals("word-count")) {
            if (args.length != 6) {
                System.err.println("client-check: word-count takes 5 arguments");
                System.exit(2);
            }
            WordCount.run(args[1], args[2], args[3], args[4], args[5]);
            return;
        }
        if (sub.equals("streams-count")) {
            if (args.length != 6) {
                System.err.println("client-check: streams-count takes 5 arguments");
                System.exit(2);
            }
            StreamsCount.run(args[1], args[2], args[3], args[4], args[5]);
            return;
        }
        String summary;
        try {
            summary = switch (sub) {
                case "produce" -> {
                    need(args, 6);
                    yield ProduceCheck.run(args[1], args[2], positive(args[3], "PARTITIONS"),
                            nonNegative(args[4], "COUNT"), codec(args[5]));
                }
                case "consume" -> {
                    need(args, 5);
                    yield ConsumeCheck.run(args[1], args[2], positive(args[3], "PARTITIONS"),
                            nonNegative(args[4], "COUNT"));
                }
                case "admin" -> {
                    need(args, 2);
                    yield AdminCheck.run(args[1]);
                }
                case "transactions-commit-on-cue" -> {
                    need(args, 4);
                    TransactionCheck.commitOnCue(args[1], args[2], positive(args[3], "PARTITIONS"));
                    yield "";
                }
                case "transactions-hang" -> {
                    need(args, 5);
                    TransactionCheck.hang(args[1], args[2], positive(args[3], "PARTITIONS"),
                            positive(args[4], "TIMEOUT_MS"));
                    yield "";
                }
                case "streams-bench" -> {
                    need(args, 7);
                    yield StreamsBench.run(args[1], args[2], args[3], args[4], args[5], positive(args[6], "RECORDS"));
                }
                case "transactions" -> {
                    need(args, 4);
                    yield TransactionCheck.run(args[1], args[2], positive(args[3], "PARTITIONS"));
                }
                default -> throw new UsageError(sub.isEmpty() ? "missing subcommand" : "unknown subcommand " + sub);
            };
        } catch (UsageError e) {
            System.err.println("client-check: " + e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
            return;
        } catch (Throwable e) {
            System.err.println("client-check " + sub + ": FAIL: " + describe(e));
            if (System.getenv("CLIENT_CHECK_TRACE") != null) {
                e.printStackTrace();
            }
            System.exit(1);
            return;
        }
        System.out.println(summary);
        System.out.flush();
        System.exit(0);
    }

    private static void groupMember(String[] args) {
        String protocol;
        Integer idle = null;
        try {
            if (args.length != 6 && args.length != 7) {
                throw new UsageError("group-member takes 5 or 6 arguments, got " + (args.length - 1));
            }
            protocol = args[4];
            if (!protocol.equals("classic") && !protocol.equals("consumer")) {
                throw new UsageError("PROTOCOL must be classic or consumer, got " + protocol);
            }
            if (args.length == 7) {
                idle = positive(args[6], "IDLE_EXIT_SECONDS");
            }
        } catch (UsageError e) {
            System.err.println("client-check: " + e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
            return;
        }
        System.exit(GroupMember.main(args[1], args[2], args[3], protocol, args[5], idle));
    }

    /** The message of e and its causes, unwrapping ExecutionException. */
    static String describe(Throwable e) {
        StringBuilder b = new StringBuilder();
        Throwable t = e;
        while (t != null) {
            if (!(t instanceof ExecutionException)) {
                if (b.length() > 0) {
                    b.append(": caused by ");
                }
                if (!(t instanceof CheckFailed)) {
                    b.append(t.getClass().getSimpleName()).append(": ");
                }
                b.append(t.getMessage());
            }
            if (t.getCause() == t) {
                break;
            }
            t = t.getCause();
        }
        return b.toString();
    }

    private static final class UsageError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    private static void need(String[] args, int n) {
        if (args.length != n) {
            throw new UsageError(args[0] + " takes " + (n - 1) + " arguments, got " + (args.length - 1));
        }
    }

    private static int positive(String s, String what) {
        int v = nonNegative(s, what);
        if (v == 0) {
            throw new UsageError(what + " must be positive");
        }
        return v;
    }

    private static int nonNegative(String s, String what) {
        try {
            int v = Integer.parseInt(s);
            if (v < 0) {
                throw new UsageError(what + " must not be negative: " + s);
            }
            return v;
        } catch (NumberFormatException e) {
            throw new UsageError(what + " is not an integer: " + s);
        }
    }

    private static String codec(String s) {
        String c = s.toLowerCase(Locale.ROOT);
        return switch (c) {
            case "none", "gzip", "snappy", "lz4", "zstd" -> c;
            default -> throw new UsageError("unknown CODEC " + s);
        };
    }
}
