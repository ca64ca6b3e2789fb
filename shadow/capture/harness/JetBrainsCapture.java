// Capture driver: JetBrains Context Center
// (packages/jetbrains-plugin/src/main/java/com/chainlesschain/ide/ContextCenter.java).
// This project's own code; it runs the plugin classes the user built from their checkout
// (--jetbrains-classpath) and never contains any of them.
//
// Request (JSON on stdin, see shadow/capture/runner.py): the same fields as the Node drivers'.
// Two modes:
//   capture (default): ContextCenter.build with the arguments bound as the plugin's own
//       ContextCenterTest binds them; the output is the plugin's MiniJson.stringify of the
//       result, parsed and re-serialised exactly as JSON.stringify(value, null, 2) would;
//   "selfcheck": each case of the shared fixture (req.cases, a path) bound the same way:
//       does the result equal case.expected (the test's assertEquals, Map/List equality)?
// Answer: one envelope line {"text", "exchanges", "network"} on stdout, ASCII only.

import com.chainlesschain.ide.ContextCenter;
import com.chainlesschain.ide.MiniJson;
import java.io.IOException;
import java.io.OutputStream;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

public final class JetBrainsCapture {
    static final String ENTRY = "packages/jetbrains-plugin/src/main/java/com/chainlesschain/ide/"
            + "ContextCenter.java#ContextCenter.build";
    static final String RUNTIME =
            "java -cp <javac of ContextCenter.java + MiniJson.java + CaptureContextCenter.java>";
    static final String BINDING = "workspaceId=stringOrNull(input.context_center.workspaceId), "
            + "candidates=input.context_center.candidates (MiniJson-parsed), "
            + "tokenBudget=((Number) tokenBudget).intValue() (DEFAULT_TOKEN_BUDGET if not a "
            + "number), pinnedIds/removedIds/refreshedIds=strings(...) \u2014 as in "
            + "ContextCenterTest.java";
    static final String DETERMINISM = "pure function; no clock or randomness";

    private JetBrainsCapture() {}

    public static void main(String[] args) throws IOException {
        Map<String, Object> req;
        try {
            String text = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
            req = asMap(MiniJson.parse(text));
        } catch (Exception | LinkageError err) {
            harnessError("request", err);
            return;
        }
        try {
            Map<String, Object> capture = "selfcheck".equals(req.get("mode"))
                    ? selfcheck(req) : capture(req);
            Map<String, Object> envelope = new LinkedHashMap<String, Object>();
            envelope.put("text", captureText(capture));
            envelope.put("exchanges", new ArrayList<Object>());
            envelope.put("network", new ArrayList<Object>());
            reply(envelope);
        } catch (Exception | LinkageError err) {
            harnessError("driver", err);
        }
    }

    // ── the two modes ───────────────────────────────────────────────────────
    static Map<String, Object> capture(Map<String, Object> req) {
        Map<String, Object> input = asMap(MiniJson.parse((String) req.get("input_text")));
        Object output = null;
        Map<String, Object> error = null;
        try {
            Map<String, Object> result = build(input.get("context_center"));
            output = MiniJson.parse(MiniJson.stringify(result));
        } catch (Throwable err) { // a throw of the entry point is recorded behaviour
            if (err instanceof VirtualMachineError && !(err instanceof StackOverflowError)) {
                throw (VirtualMachineError) err;
            }
            error = errorRecord(err);
        }
        Map<String, Object> doc = new LinkedHashMap<String, Object>();
        doc.put("format", "legacy-capture/v1");
        doc.put("scenario", req.get("scenario"));
        doc.put("surface", "jetbrains");
        doc.put("entry", ENTRY);
        doc.put("legacy_commit", req.get("legacy_commit"));
        doc.put("node", req.get("node"));
        Map<String, Object> options = new LinkedHashMap<String, Object>();
        options.put("runtime", RUNTIME);
        options.put("java", javaName());
        doc.put("options", options);
        Map<String, Object> binding = new LinkedHashMap<String, Object>();
        binding.put("arguments", BINDING);
        doc.put("input_binding", binding);
        doc.put("env_flags", new LinkedHashMap<String, Object>());
        Map<String, Object> determinism = new LinkedHashMap<String, Object>();
        determinism.put("note", DETERMINISM);
        doc.put("determinism", determinism);
        doc.put("output", output);
        doc.put("error", error);
        return doc;
    }

    static Map<String, Object> selfcheck(Map<String, Object> req) throws IOException {
        Object cases = MiniJson.parse(Files.readString(Paths.get((String) req.get("cases")),
                StandardCharsets.UTF_8));
        List<Object> out = new ArrayList<Object>();
        if (cases instanceof List) {
            for (Object item : (List<?>) cases) {
                Map<?, ?> c = item instanceof Map ? (Map<?, ?>) item : new LinkedHashMap<>();
                boolean matches;
                try {
                    matches = Objects.equals(c.get("expected"), build(c.get("input")));
                } catch (Exception | LinkageError | StackOverflowError err) {
                    matches = false; // a throw is no match
                }
                Map<String, Object> row = new LinkedHashMap<String, Object>();
                row.put("name", c.get("name"));
                row.put("matches", Boolean.valueOf(matches));
                out.add(row);
            }
        }
        Map<String, Object> doc = new LinkedHashMap<String, Object>();
        doc.put("selfcheck", out);
        return doc;
    }

    /** ContextCenter.build, the arguments bound as ContextCenterTest.assertCase binds them. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> build(Object rawInput) {
        Map<String, Object> input = (Map<String, Object>) rawInput;
        Object budget = input.get("tokenBudget");
        return ContextCenter.build(
                stringOrNull(input.get("workspaceId")),
                (List<Map<String, Object>>) (List<?>) input.get("candidates"),
                budget instanceof Number ? ((Number) budget).intValue()
                        : ContextCenter.DEFAULT_TOKEN_BUDGET,
                strings(input.get("pinnedIds")),
                strings(input.get("removedIds")),
                strings(input.get("refreshedIds")));
    }

    private static List<String> strings(Object value) {
        List<String> out = new ArrayList<String>();
        if (!(value instanceof List)) return out;
        for (Object item : (List<?>) value) out.add(String.valueOf(item));
        return out;
    }

    private static String stringOrNull(Object value) {
        return value == null ? null : String.valueOf(value);
    }

    static String javaName() {
        String vm = String.valueOf(System.getProperty("java.vm.name")).toLowerCase();
        String name = vm.contains("openjdk") ? "openjdk"
                : String.valueOf(System.getProperty("java.vendor"));
        return name + " " + Runtime.version().feature();
    }

    static Map<String, Object> errorRecord(Throwable err) {
        Map<String, Object> out = new LinkedHashMap<String, Object>();
        out.put("name", err.getClass().getSimpleName());
        out.put("message", err.getMessage() == null ? "" : err.getMessage());
        out.put("code", null);
        return out;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asMap(Object value) {
        if (!(value instanceof Map)) throw new IllegalArgumentException("not a JSON object");
        return (Map<String, Object>) value;
    }

    // ── output ──────────────────────────────────────────────────────────────
    private static void reply(Map<String, Object> envelope) throws IOException {
        StringBuilder sb = new StringBuilder();
        write(envelope, sb, null, "", true);
        sb.append('\n');
        OutputStream out = System.out;
        out.write(sb.toString().getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private static void harnessError(String stage, Throwable err) throws IOException {
        Map<String, Object> he = new LinkedHashMap<String, Object>();
        he.put("stage", stage);
        he.put("name", err.getClass().getSimpleName());
        he.put("code", null);
        he.put("message", String.valueOf(err.getMessage()));
        Map<String, Object> envelope = new LinkedHashMap<String, Object>();
        envelope.put("harness_error", he);
        envelope.put("network", new ArrayList<Object>());
        reply(envelope);
        System.exit(3);
    }

    /** The exact bytes of a capture file: JSON.stringify(value, null, 2) and a final newline. */
    static String captureText(Object value) {
        StringBuilder sb = new StringBuilder();
        write(value, sb, "  ", "", false);
        return sb.append('\n').toString();
    }

    /**
     * JSON.stringify of the MiniJson value model (Map, List, String, Long, Double, Boolean,
     * null); {@code gap} null is the compact form.  {@code ascii} escapes every non-ASCII
     * code unit as well (the envelope line only).
     */
    static void write(Object v, StringBuilder sb, String gap, String indent, boolean ascii) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            quote((String) v, sb, ascii);
        } else if (v instanceof Boolean) {
            sb.append(v.toString());
        } else if (v instanceof Number) {
            sb.append(number((Number) v));
        } else if (v instanceof Map) {
            Map<?, ?> m = (Map<?, ?>) v;
            if (m.isEmpty()) {
                sb.append("{}");
                return;
            }
            String inner = gap == null ? "" : indent + gap;
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) sb.append(',');
                first = false;
                if (gap != null) sb.append('\n').append(inner);
                quote(String.valueOf(e.getKey()), sb, ascii);
                sb.append(gap == null ? ":" : ": ");
                write(e.getValue(), sb, gap, inner, ascii);
            }
            if (gap != null) sb.append('\n').append(indent);
            sb.append('}');
        } else if (v instanceof Iterable) {
            List<Object> items = new ArrayList<Object>();
            for (Object o : (Iterable<?>) v) items.add(o);
            if (items.isEmpty()) {
                sb.append("[]");
                return;
            }
            String inner = gap == null ? "" : indent + gap;
            sb.append('[');
            boolean first = true;
            for (Object o : items) {
                if (!first) sb.append(',');
                first = false;
                if (gap != null) sb.append('\n').append(inner);
                write(o, sb, gap, inner, ascii);
            }
            if (gap != null) sb.append('\n').append(indent);
            sb.append(']');
        } else {
            quote(String.valueOf(v), sb, ascii);
        }
    }

    private static final long SAFE = 1L << 53;

    /** A number as JavaScript prints it (JSON.parse of MiniJson's digits, then toString). */
    static String number(Number n) {
        if (n instanceof Long || n instanceof Integer) {
            long x = n.longValue();
            if (x >= -SAFE && x <= SAFE) return Long.toString(x);
        }
        double d = n.doubleValue();
        if (Double.isNaN(d) || Double.isInfinite(d)) return "null";
        if (d == 0) return "0";
        String sign = d < 0 ? "-" : "";
        BigDecimal exact = new BigDecimal(Math.abs(d));
        BigDecimal shortest = exact;
        for (int p = 1; p <= 17; p++) {
            BigDecimal r = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
            if (r.doubleValue() == Math.abs(d)) {
                shortest = r;
                break;
            }
        }
        BigDecimal stripped = shortest.stripTrailingZeros();
        String digits = stripped.unscaledValue().toString();
        int k = digits.length();
        int e = k - stripped.scale(); // value = 0.digits * 10^e
        StringBuilder sb = new StringBuilder(sign);
        if (k <= e && e <= 21) {
            sb.append(digits);
            for (int i = k; i < e; i++) sb.append('0');
        } else if (0 < e && e <= 21) {
            sb.append(digits, 0, e).append('.').append(digits, e, k);
        } else if (-6 < e && e <= 0) {
            sb.append("0.");
            for (int i = e; i < 0; i++) sb.append('0');
            sb.append(digits);
        } else {
            int exp = e - 1;
            sb.append(digits.charAt(0));
            if (k > 1) sb.append('.').append(digits, 1, k);
            sb.append('e').append(exp < 0 ? '-' : '+').append(Math.abs(exp));
        }
        return sb.toString();
    }

    /** A JSON.stringify string literal (lone surrogates escaped, as Node 12+ does). */
    static void quote(String s, StringBuilder sb, boolean ascii) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    boolean pair = Character.isHighSurrogate(c) && i + 1 < s.length()
                            && Character.isLowSurrogate(s.charAt(i + 1));
                    boolean lone = Character.isSurrogate(c) && !pair
                            && !(Character.isLowSurrogate(c) && i > 0
                                    && Character.isHighSurrogate(s.charAt(i - 1)));
                    if (c < 0x20 || lone || (ascii && c > 0x7e)) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
