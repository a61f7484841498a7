import XCTest
import TestSupport

/// Mutual TLS against echo.py requiring a client certificate from the run's test CA.
/// echo.py answers "whoami" with the certificate's CN.
final class ClientCertificateTests: IntegrationTestCase {
    private func startMutualEcho() throws -> (Peer, ClientTLSMaterial) {
        let client = try ClientTLSMaterial.shared()
        let tls = client.server
        let echo = try startEcho(["--tls", tls.serverCert, tls.serverKey, "--client-ca", tls.caCert])
        return (echo, client)
    }

    func testAcceptedWithTheRightCertificate() throws {
        let (echo, client) = try startMutualEcho()
        let result = try runWspipe(["-v", "--cacert", client.server.caCert, "--cert", client.cert, "--key", client.key,
                                    url(echo, scheme: "wss", host: "localhost")], stdin: .bytes(Array("whoami\nhi\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "wspipe-test-client\nhi\n")
        assertStderr(result, contains: "client certificate: \(client.cert)")
    }

    func testKeyAndCertificateInOneFile() throws {
        let (echo, client) = try startMutualEcho()
        let combined = path("combined.pem")
        let joined = try String(contentsOfFile: client.cert, encoding: .utf8) + String(contentsOfFile: client.key, encoding: .utf8)
        try joined.write(toFile: combined, atomically: false, encoding: .utf8)
        let result = try runWspipe(["--cacert", client.server.caCert, "--cert", combined, url(echo, scheme: "wss", host: "localhost")],
                                   stdin: .bytes(Array("whoami\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "wspipe-test-client\n")
    }

    func testRefusedWithoutACertificateExit4() throws {
        let (echo, client) = try startMutualEcho()
        let result = try runWspipe(["--cacert", client.server.caCert, url(echo, scheme: "wss", host: "localhost")],
                                   stdin: .bytes(Array("whoami\n".utf8)))
        assertExit(result, 4)
        assertStderr(result, contains: "requires a client certificate (give one with --cert and --key)")
        assertStderrLinesPrefixed(result)
    }

    func testRefusedWithACertificateFromAnotherCAExit4() throws {
        let (echo, client) = try startMutualEcho()
        let result = try runWspipe(["--cacert", client.server.caCert, "--cert", client.strangerCert, "--key", client.strangerKey,
                                    url(echo, scheme: "wss", host: "localhost")], stdin: .bytes(Array("whoami\n".utf8)))
        XCTAssertEqual(result.exitCode, 4, "\(result)")
        XCTAssertEqual(result.stdoutText, "")
    }

    func testEncryptedKeyWithPassphraseFromEnvironmentOrFile() throws {
        let (echo, client) = try startMutualEcho()
        let passphrase = ClientTLSMaterial.passphrase
        let fromEnvironment = try runWspipe(["-v", "--cacert", client.server.caCert, "--cert", client.cert,
                                             "--key", client.encryptedKey, "--key-pass-env", "CLIENT_KEY_PASS",
                                             url(echo, scheme: "wss", host: "localhost")],
                                            stdin: .bytes(Array("whoami\n".utf8)), environment: ["CLIENT_KEY_PASS": passphrase])
        assertExit(fromEnvironment, 0)
        assertStdout(fromEnvironment, "wspipe-test-client\n")
        assertNoSecrets(fromEnvironment, [passphrase])

        let file = path("key-pass")
        try (passphrase + "\n").write(toFile: file, atomically: false, encoding: .utf8)
        let fromFile = try runWspipe(["--cacert", client.server.caCert, "--cert", client.cert, "--key", client.encryptedKey,
                                      "--key-pass-file", file, url(echo, scheme: "wss", host: "localhost")],
                                     stdin: .bytes(Array("whoami\n".utf8)))
        assertExit(fromFile, 0)
        assertStdout(fromFile, "wspipe-test-client\n")
    }

    func testEncryptedKeyProblemsExit4WithoutPrompting() throws {
        let (echo, client) = try startMutualEcho()
        // stdin is a pipe with data: OpenSSL must not read a passphrase from anywhere.
        let missing = try runWspipe(["--cacert", client.server.caCert, "--cert", client.cert, "--key", client.encryptedKey,
                                     url(echo, scheme: "wss", host: "localhost")], stdin: .bytes(Array("guess\n".utf8)))
        assertExit(missing, 4)
        assertStderr(missing, contains: "the private key in '\(client.encryptedKey)' is encrypted: give its passphrase with "
                     + "--key-pass-env VAR or --key-pass-file FILE")
        let wrong = try runWspipe(["-v", "--cacert", client.server.caCert, "--cert", client.cert, "--key", client.encryptedKey,
                                   "--key-pass-env", "P", url(echo, scheme: "wss", host: "localhost")],
                                  environment: ["P": "not-the-Passphrase"])
        assertExit(wrong, 4)
        assertStderr(wrong, contains: "cannot decrypt the private key in '\(client.encryptedKey)': wrong passphrase")
        assertNoSecrets(wrong, ["not-the-Passphrase", ClientTLSMaterial.passphrase])
        let mismatched = try runWspipe(["--cacert", client.server.caCert, "--cert", client.cert, "--key", client.server.serverKey,
                                        url(echo, scheme: "wss", host: "localhost")])
        assertExit(mismatched, 4)
        assertStderr(mismatched, contains: "does not belong to the certificate")
    }

    func testUnsetPassphraseVariableIsAUsageError() throws {
        let client = try ClientTLSMaterial.shared()
        let result = try runWspipe(["--cert", client.cert, "--key", client.encryptedKey, "--key-pass-env", "UNSET_VAR",
                                    "wss://localhost:9/"])
        assertExit(result, 2)
        assertStderr(result, contains: "--key-pass-env: the environment variable UNSET_VAR is not set or empty")
    }

    func testTLSMinimumVersion() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startEcho(["--tls", tls.serverCert, tls.serverKey])
        let result = try runWspipe(["-v", "--tls-min", "1.3", "--cacert", tls.caCert, url(echo, scheme: "wss", host: "localhost")],
                                   stdin: .bytes(Array("x\n".utf8)))
        assertExit(result, 0)
        assertStderr(result, contains: "TLS established: TLSv1.3")
    }
}
