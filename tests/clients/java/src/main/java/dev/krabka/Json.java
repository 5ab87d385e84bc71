package dev.krabka;

import java.util.Map;

/** Just enough JSON output for the one-line summaries. */
final class Json {
    private Json() {}

    static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    /** An object whose values are already-encoded JSON. */
    static String object(Map<String, String> fields) {
        StringBuilder b = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, String> e : fields.entrySet()) {
            if (!first) {
                b.append(',');
            }
            first = false;
            b.append(str(e.getKey())).append(':').append(e.getValue());
        }
        return b.append('}').toString();
    }
}
