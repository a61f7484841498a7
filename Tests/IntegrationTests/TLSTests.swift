import XCTest
import TestSupport

/// wss:// against echo.py over TLS, with a CA and certificates made for this run.
final class TLSTests: IntegrationTestCase {
    private func startTLSEcho(cert: String, key: String) throws -> Peer {
        try startEcho(["--tls", cert, key])
    }

    func testEchoOverTLSWithCACertOption() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startTLSEcho(cert: tls.serverCert, key: tls.serverKey)
        for host in ["localhost", "127.0.0.1"] {
            let result = try runWspipe(["--cacert", tls.caCert, url(echo, scheme: "wss", host: host)],
                                       stdin: .bytes(Array("a\nb\n".utf8)))
            assertExit(result, 0)
            assertStdout(result, "a\nb\n")
            XCTAssertEqual(result.stderr, "")
        }
    }

    /// Issue 35 item 7: TLS options that no hop of the route uses are said in one warning
    /// (they were ignored without a word); -q hides it; -L (a redirect may lead to wss://)
    /// and wss:// say nothing.
    func testTLSOptionsThatNoHopUsesAreSaid() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startEcho()
        let options = ["-k", "--cacert", tls.caCert, "--cert", tls.otherCert, "--key", tls.otherKey]
        let plain = try runWspipe(options + [url(echo)], stdin: .bytes(Array("a\n".utf8)))
        assertExit(plain, 0)
        assertStdout(plain, "a\n")
        XCTAssertEqual(plain.stderr, "wspipe: warning: --insecure, --cacert, --cert and --key are ignored: no hop of the route to "
                       + "\(url(echo)) uses TLS (write wss:// for TLS to the server)\n")
        let one = try runWspipe(["--tls-min", "1.2", url(echo)], stdin: .bytes(Array("a\n".utf8)))
        XCTAssertEqual(one.stderr, "wspipe: warning: --tls-min is ignored: no hop of the route to \(url(echo)) uses TLS "
                       + "(write wss:// for TLS to the server)\n")
        for quiet in [["-q"], ["-L"]] {
            let result = try runWspipe(quiet + options + [url(echo)], stdin: .bytes(Array("a\n".utf8)))
            assertExit(result, 0)
            XCTAssertEqual(result.stderr, "", "\(quiet)")
        }
    }

    func testSSLCertFileEnvironmentIsTheSystemStore() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startTLSEcho(cert: tls.serverCert, key: tls.serverKey)
        let result = try runWspipe([url(echo, scheme: "wss", host: "localhost")], stdin: .bytes(Array("tls\n".utf8)),
                                   environment: ["SSL_CERT_FILE": tls.caCert])
        assertExit(result, 0)
        assertStdout(result, "tls\n")
    }

    func testInsecureAcceptsAnUntrustedCertificate() throws {
        let tls = try TLSMaterial.shared()
        // Unknown CA and a name that does not match: -k accepts it all.
        let echo = try startTLSEcho(cert: tls.otherCert, key: tls.otherKey)
        let result = try runWspipe(["-k", url(echo, scheme: "wss", host: "localhost")], stdin: .bytes(Array("k\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "k\n")
    }

    /// -v says so when the certificate was not verified, naming the option (the transport
    /// words the line with the CLI's setting names).
    func testVerboseNotesACertificateNotVerifiedWithInsecure() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startTLSEcho(cert: tls.serverCert, key: tls.serverKey)
        let result = try runWspipe(["-v", "-k", url(echo, scheme: "wss", host: "localhost")], stdin: .bytes(Array("k\n".utf8)))
        assertExit(result, 0)
        assertStderr(result, contains: "wspipe: * TLS established: TLSv1.3 ")
        assertStderr(result, contains: " (certificate not verified: --insecure)\n")
        let verified = try runWspipe(["-v", "--cacert", tls.caCert, url(echo, scheme: "wss", host: "localhost")],
                                     stdin: .bytes(Array("v\n".utf8)))
        assertExit(verified, 0)
        assertStderr(verified, contains: "wspipe: * TLS established: TLSv1.3 ")
        XCTAssertFalse(verified.stderr.contains("not verified"), verified.stderr)
    }

    func testUnknownCAExits4() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startTLSEcho(cert: tls.serverCert, key: tls.serverKey)
        let result = try runWspipe([url(echo, scheme: "wss", host: "localhost")])
        assertExit(result, 4)
        assertStderr(result, contains: "unknown CA")
        assertStderr(result, contains: "--cacert")
        assertStderrLinesPrefixed(result)
    }

    func testHostnameMismatchExits4() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startTLSEcho(cert: tls.otherCert, key: tls.otherKey)
        for host in ["localhost", "127.0.0.1"] {
            let result = try runWspipe(["--cacert", tls.caCert, url(echo, scheme: "wss", host: host)])
            assertExit(result, 4)
            assertStderr(result, contains: "not valid for '\(host)'")
        }
    }

    /// Certificates OpenSSL refuses for reasons of its own were said in its words alone
    /// ("the server's certificate was refused [unsuitable certificate purpose]", "no
    /// certificate or crl found"); now in a sentence, its words after it in brackets.
    func testCertificateProblemsAreSaidInWords() throws {
        let tls = try TLSMaterial.shared(), client = try ClientTLSMaterial.shared()
        let clientServing = try startTLSEcho(cert: client.cert, key: client.key)  // extendedKeyUsage=clientAuth
        let purpose = try runWspipe(["--cacert", tls.caCert, url(clientServing, scheme: "wss", host: "localhost")])
        assertExit(purpose, 4)
        assertStderr(purpose, contains: "the server's certificate is not meant for a TLS server (its extended key usage lacks "
                     + "serverAuth) [unsuitable certificate purpose]")
        let selfSigned = try startTLSEcho(cert: client.strangerCert, key: client.strangerKey)
        let stranger = try runWspipe(["--cacert", tls.caCert, url(selfSigned, scheme: "wss", host: "localhost")])
        assertExit(stranger, 4)
        assertStderr(stranger, contains: "the server's certificate is self-signed (trust that certificate itself with --cacert FILE)")
        let echo = try startTLSEcho(cert: tls.serverCert, key: tls.serverKey)
        let keyAsCA = try runWspipe(["--cacert", tls.serverKey, url(echo, scheme: "wss", host: "localhost")])
        assertExit(keyAsCA, 4)
        XCTAssertEqual(keyAsCA.stderr, "wspipe: TLS: cannot load CA certificates from '\(tls.serverKey)': it holds no certificate "
                       + "in PEM form (-----BEGIN CERTIFICATE-----) [no certificate or crl found]\n")
    }

    func testPlainWebSocketToATLSPortFails() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startTLSEcho(cert: tls.serverCert, key: tls.serverKey)
        let result = try runWspipe(["--connect-timeout", "5", url(echo)])
        XCTAssertNotEqual(result.exitCode, 0, "\(result)")
        XCTAssertLessThan(result.elapsed, 6)
    }
}
