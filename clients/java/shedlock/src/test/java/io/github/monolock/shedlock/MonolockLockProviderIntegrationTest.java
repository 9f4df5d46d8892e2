package io.github.monolock.shedlock;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.github.monolock.MonolockClient;
import java.io.IOException;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.test.support.AbstractExtensibleLockProviderIntegrationTest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;

/**
 * ShedLock's own suite for extensible providers (shedlock-test-support,
 * unchanged, with its fuzz test), against the real server: the provider
 * under test, and the server's admin API as the judge of locked and unlocked.
 */
class MonolockLockProviderIntegrationTest extends AbstractExtensibleLockProviderIntegrationTest {
    private static TestServer server;
    private static MonolockClient client;
    private MonolockLockProvider provider;

    @BeforeAll
    static void startServer() throws IOException {
        String bin = TestServer.binary();
        assumeTrue(bin != null, "needs the monolock server: make build, then pass -Dmonolock.bin=bin/monolock or MONOLOCK_BIN (make java-test does)");
        server = new TestServer(bin);
        client = MonolockClient.builder(server.address).build();
    }

    @AfterAll
    static void stopServer() {
        if (client != null) client.close();
        if (server != null) server.close();
    }

    @BeforeEach
    void newProvider() {
        provider = new MonolockLockProvider(client);
    }

    @AfterEach
    void closeProvider() {
        provider.close();
    }

    @Override
    protected ExtensibleLockProvider getLockProvider() {
        return provider;
    }

    @Override
    protected void assertUnlocked(String lockName) {
        assertTrue(server.awaitFree(lockName), "the server still had a holder for " + lockName + " after 10 s");
    }

    @Override
    protected void assertLocked(String lockName) {
        assertTrue(server.held(lockName), "the server had no holder for " + lockName);
    }
}
