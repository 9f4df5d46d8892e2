package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.monolock.Fences.Dialect;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Fences' statements against fence/testdata/sql.txt, the fencing SQL every
 * monolock client sends, byte for byte (the file's header says the format).
 * JDBC spells PostgreSQL's $1 and $2 as ?, and only those are substituted.
 */
class FenceVectorsTest {
    /** The sections of the vectors file by "DIALECT NAME". */
    static Map<String, String> vectors() throws IOException {
        String text = Files.readString(Path.of("..", "..", "fence", "testdata", "sql.txt"), StandardCharsets.UTF_8);
        Map<String, String> vectors = new HashMap<>();
        String name = null;
        List<String> body = new ArrayList<>();
        for (String line : text.split("\n", -1)) {
            if (line.startsWith("-- ") && line.endsWith(" --")) {
                if (name != null) vectors.put(name, join(body));
                name = line.substring(3, line.length() - 3);
                body.clear();
            } else if (name != null) {
                body.add(line);
            }
        }
        if (name != null) vectors.put(name, join(body));
        return vectors;
    }

    private static String join(List<String> body) {
        String s = String.join("\n", body);
        return s.endsWith("\n") ? s.substring(0, s.length() - 1) : s;
    }

    @ParameterizedTest
    @EnumSource(Dialect.class)
    void statementsAreTheVectors(Dialect d) throws IOException {
        Map<String, String> v = vectors();
        assertEquals(v.get(d.id() + " schema"), Fences.schema(d), "schema(" + d + ")");
        String admit = v.get(d.id() + " admit").replace("$1", "?").replace("$2", "?");
        assertEquals(admit, Fences.admitStatement(d), "admitStatement(" + d + ")");
    }
}
