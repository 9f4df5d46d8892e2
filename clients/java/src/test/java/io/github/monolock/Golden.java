package io.github.monolock;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;

/** The vectors of protocol/testdata/golden.txt, the protocol's byte contract. */
final class Golden {
    private Golden() {}

    private static Map<String, byte[]> vectors;

    static synchronized byte[] bytes(String name) {
        if (vectors == null) {
            vectors = new HashMap<>();
            try {
                for (String line : Files.readAllLines(Path.of("..", "..", "protocol", "testdata", "golden.txt"))) {
                    if (line.isEmpty() || line.startsWith("#")) continue;
                    String[] f = line.split("\t", 2);
                    vectors.put(f[0], HexFormat.of().parseHex(f[1].replace(" ", "")));
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        byte[] b = vectors.get(name);
        if (b == null) throw new IllegalArgumentException("no golden vector " + name);
        return b.clone();
    }

    static Iterable<String> names() {
        bytes("acquire");
        return vectors.keySet();
    }
}
