package dev.krabka;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * The deterministic record contract shared with the Python and Go checkers.
 *
 * <p>For global index i in [0, COUNT): partition = i % PARTITIONS; key = UTF-8 "k-" + i;
 * value = 1 + (i * 37 % 2000) bytes, byte j = (i + j) % 251; headers = [("idx", UTF-8 decimal i),
 * ("h2", empty)]; CreateTime timestamp = 1700000000000 + i. Within a partition records are
 * sent in increasing i, so partition p holds indexes p, p + PARTITIONS, p + 2 * PARTITIONS, ...
 * at consecutive offsets.
 */
final class RecordContract {
    static final long TIMESTAMP_BASE = 1_700_000_000_000L;
    static final String IDX_HEADER = "idx";
    static final String EMPTY_HEADER = "h2";

    private RecordContract() {}

    static int partition(long i, int partitions) {
        return (int) (i % partitions);
    }

    static byte[] key(long i) {
        return ("k-" + i).getBytes(StandardCharsets.UTF_8);
    }

    static int valueLength(long i) {
        return 1 + (int) (i * 37 % 2000);
    }

    static byte[] value(long i) {
        byte[] v = new byte[valueLength(i)];
        for (int j = 0; j < v.length; j++) {
            v[j] = (byte) ((i + j) % 251);
        }
        return v;
    }

    static List<Header> headers(long i) {
        return List.of(
                new RecordHeader(IDX_HEADER, Long.toString(i).getBytes(StandardCharsets.UTF_8)),
                new RecordHeader(EMPTY_HEADER, new byte[0]));
    }

    static long timestamp(long i) {
        return TIMESTAMP_BASE + i;
    }

    /** Number of indexes in [0, count) that map to partition p. */
    static long countFor(int p, int partitions, long count) {
        if (p >= count) {
            return 0;
        }
        return (count - 1 - p) / partitions + 1;
    }

    /** Describes how {@code actual} differs from the value of index i, or null when equal. */
    static String valueMismatch(long i, byte[] actual) {
        byte[] want = value(i);
        if (actual == null) {
            return "value is null, expected " + want.length + " bytes";
        }
        if (Arrays.equals(want, actual)) {
            return null;
        }
        if (actual.length != want.length) {
            return "value has " + actual.length + " bytes, expected " + want.length;
        }
        int j = Arrays.mismatch(want, actual);
        return "value byte " + j + " is " + (actual[j] & 0xff) + ", expected " + (want[j] & 0xff);
    }

    static String show(byte[] b) {
        if (b == null) {
            return "null";
        }
        return "\"" + new String(b, StandardCharsets.UTF_8) + "\"";
    }
}
