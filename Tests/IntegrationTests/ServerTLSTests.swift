// wspipe -l with --cert/--key (wss://) and --client-ca (mutual TLS): independent clients
// (Python websockets and ssl, websocat, node ws, our own client) against the run's test CA;
// certificate mistakes fail before listening; one client's TLS failure never stops the server.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ServerTLSTests: IntegrationTestCase {
    /// Starts `wspipe -l 0 --cert --key ...` and reads the port from its `listening on wss://` line.
    func startTLSServer(_ arguments: [String], cert: String? = nil, key: String? = nil, environment: [String: String] = [:],
                        file: StaticString = #filePath, line: UInt = #line) throws -> (ChildProcess, Int) {
        let tls = try TLSMaterial.shared()
        return try startListening(["--cert", cert ?? tls.serverCert, "--key", key ?? tls.serverKey] + arguments, scheme: "wss",
                                  environment: environment, file: file, line: line)
    }

    /// tls_client.py with `arguments`; its stdout.
    func tlsClient(_ arguments: [String], timeout: Double = 30) throws -> String {
        let child = try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/tls_client.py"] + arguments,
                                     environment: Locations.baseEnvironment, stdin: .null)
        return finish(child, timeout: timeout).stdoutText
    }

    /// Stops the server with SIGTERM: exit 0, and its stderr.
    func stop(_ server: ChildProcess, file: StaticString = #filePath, line: UInt = #line) -> String {
        server.signal(SIGTERM)
        let result = finish(server)
        assertDiedOf(result, SIGTERM, file: file, line: line)
        return result.stderr
    }

    static let echoed = "text:hello\nbinary:3:same\ntext:\ntext:1000 chars\nbinary:300000:same\nclosed 1000\n"

    func testEchoOverWSSToPythonWebsockets() throws {
        let tls = try TLSMaterial.shared()
        let (server, port) = try startTLSServer(["--echo", "-v"])
        XCTAssertEqual(try tlsClient(["echo", "wss://localhost:\(port)/any", tls.caCert]), Self.echoed)
        let stderr = stop(server)
        XCTAssertTrue(stderr.contains("client 1 connected from 127.0.0.1:"), stderr)
        XCTAssertTrue(stderr.contains("to /any over TLSv1.3 "), "-v names the TLS version and cipher: \(stderr)")
    }

    /// The stdio mode (no mode option) serves wss:// as the others do: it printed
    /// `listening on wss://` and listened without TLS, so a wss:// client failed (exit 4).
    func testStdioModeOverWSSToOurClient() throws {
        let tls = try TLSMaterial.shared()
        let (server, port) = try startTLSServer(["--receive-only", "--oneshot"])
        let ours = try runWspipe(["--cacert", tls.caCert, "wss://localhost:\(port)/"], stdin: .bytes(Array("over tls\n".utf8)),
                                 timeout: 10)
        assertExit(ours, 0)
        if ours.termination != .exited(0) { server.signal(SIGKILL) }  // no client came: --oneshot would wait
        let result = finish(server, timeout: 10)
        assertExit(result, 0)
        assertStdout(result, "over tls\n")
    }

    func testEchoOverWSSToOurClientWebsocatAndNode() throws {
        let tls = try TLSMaterial.shared()
        let (server, port) = try startTLSServer(["--echo"])
        let ours = try runWspipe(["--cacert", tls.caCert, "wss://localhost:\(port)/"], stdin: .bytes(Array("one\ntwo\n".utf8)))
        assertExit(ours, 0)
        assertStdout(ours, "one\ntwo\n")
        // By IP address too: the certificate names 127.0.0.1.
        assertStdout(try runWspipe(["--cacert", tls.caCert, "wss://127.0.0.1:\(port)/"], stdin: .bytes(Array("ip\n".utf8))), "ip\n")
        // Without --cacert the test CA is unknown: our client refuses the certificate.
        let untrusted = try runWspipe(["wss://localhost:\(port)/"], stdin: .bytes(Array("x\n".utf8)))
        assertExit(untrusted, 4)
        assertStderr(untrusted, contains: "unknown CA")

        let websocat = try ChildProcess(executable: Locations.websocat, arguments: ["-k", "-t", "wss://127.0.0.1:\(port)/"],
                                        environment: Locations.baseEnvironment, stdin: .bytes(Array("three\nfour\n".utf8)))
        XCTAssertEqual(finish(websocat).stdoutText, "three\nfour\n")

        // Node's ws (skipped or, under CI=true, failed where it is not installed).
        let (node, ws) = try Tool.nodeWithWS()
        let script = path("client.js")
        try """
            const WebSocket = require('\(ws)');
            const fs = require('fs');
            const s = new WebSocket('wss://localhost:\(port)/', { ca: fs.readFileSync('\(tls.caCert)') });
            s.on('open', () => s.send('from node'));
            s.on('message', (m) => { console.log('got ' + m); s.close(1000); });
            s.on('close', (code) => console.log('closed ' + code));
            s.on('error', (e) => console.log('error ' + e.message));
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let client = try ChildProcess(executable: node, arguments: [script], environment: Locations.baseEnvironment,
                                      stdin: .null)
        XCTAssertEqual(finish(client).stdoutText, "got from node\nclosed 1000\n")
        _ = stop(server)
    }

    /// The request and 2000 frames, each its own TLS record, corked right after the
    /// handshake: OpenSSL reads them ahead in one read(2), so records epoll cannot see must
    /// still be read and served.
    func testPipelinedRequestAndFramesBehindTheTLSHandshake() throws {
        let tls = try TLSMaterial.shared()
        let (server, port) = try startTLSServer(["--echo"])
        XCTAssertEqual(try tlsClient(["pipelined", String(port), tls.caCert, "2000"]),
                       "HTTP/1.1 101 Switching Protocols\nm0 ... m1999 (2000, in order: True)\n")
        _ = stop(server)
    }

    func testProgramSeesHTTPSWithoutAClientCertificate() throws {
        let tls = try TLSMaterial.shared()
        let (server, port) = try startTLSServer(["--sh", #"echo "$HTTPS|${SSL_CLIENT_S_DN-unset}|$SERVER_PORT""#])
        // No port in the URL, so none in Host: SERVER_PORT is then TLS's 443.
        let result = try runWspipe(["--cacert", tls.caCert, "--no-close", "--connect-to", "127.0.0.1:\(port)", "wss://localhost/"],
                                   stdin: .null)
        assertStdout(result, "on|unset|443\n")
        _ = stop(server)
    }

    func testMutualTLSSubjectInTheProgramsEnvironment() throws {
        let client = try ClientTLSMaterial.shared()
        let tls = client.server
        let (server, port) = try startTLSServer(["--client-ca", tls.caCert, "-v",
                                                 "--sh", #"echo "$HTTPS|$SSL_CLIENT_VERIFY|$SSL_CLIENT_S_DN""#])
        let url = "wss://localhost:\(port)/"
        let accepted = try runWspipe(["--cacert", tls.caCert, "--cert", client.cert, "--key", client.key, "--no-close", url],
                                     stdin: .null)
        assertExit(accepted, 0)
        assertStdout(accepted, "on|SUCCESS|CN=wspipe-test-client\n")

        // No certificate: our client is told why (the alert reaches it), Python is refused.
        let without = try runWspipe(["--cacert", tls.caCert, "--no-close", url], stdin: .null)
        assertExit(without, 4)
        assertStderr(without, contains: "the server requires a client certificate")
        XCTAssertTrue(try tlsClient(["echo", url, tls.caCert]).hasPrefix("refused "))
        // A certificate from a CA the server does not trust.
        let stranger = try runWspipe(["--cacert", tls.caCert, "--cert", client.strangerCert, "--key", client.strangerKey,
                                      "--no-close", url], stdin: .null)
        assertExit(stranger, 4)
        XCTAssertEqual(stranger.stdoutText, "")

        // The server goes on serving: Python websockets with the certificate.
        let python = try ChildProcess(executable: Locations.python,
                                      arguments: ["-c", """
                                          import asyncio, ssl, sys
                                          from websockets.asyncio.client import connect
                                          async def main():
                                              ctx = ssl.create_default_context(cafile=sys.argv[2])
                                              ctx.load_cert_chain(sys.argv[3], sys.argv[4])
                                              async with connect(sys.argv[1], ssl=ctx) as ws:
                                                  print(await ws.recv())
                                          asyncio.run(main())
                                          """, url, tls.caCert, client.cert, client.key],
                                      environment: Locations.baseEnvironment, stdin: .null)
        XCTAssertEqual(finish(python).stdoutText, "on|SUCCESS|CN=wspipe-test-client\n")
        let stderr = stop(server)
        XCTAssertTrue(stderr.contains("client certificate CN=wspipe-test-client"), stderr)
        XCTAssertTrue(stderr.contains("failed: peer did not return a certificate"), "one -v line per refused client: \(stderr)")
        XCTAssertTrue(stderr.contains("failed: certificate verify failed"), stderr)
    }

    func testEncryptedKeyNeedsTheRightPassphraseBeforeListening() throws {
        let client = try ClientTLSMaterial.shared()
        let passphrase = ClientTLSMaterial.passphrase
        // The client key pair is a valid server key pair too (the certificate's use is not checked by the loader).
        let base = ["-l", "0", "--cert", client.cert, "--key", client.encryptedKey, "--echo"]
        let missing = try runWspipe(base)
        assertExit(missing, 4)
        assertStderr(missing, contains: "is encrypted: give its passphrase with --key-pass-env VAR or --key-pass-file FILE")
        let wrong = try runWspipe(base + ["--key-pass-env", "KP"], environment: ["KP": "not the passphrase"])
        assertExit(wrong, 4)
        assertStderr(wrong, contains: "cannot decrypt the private key in '\(client.encryptedKey)': wrong passphrase")
        for result in [missing, wrong] {
            XCTAssertFalse(result.stderr.contains("listening"), result.stderr)
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, "one line: \(result.stderr)")
        }

        let (server, port) = try startTLSServer(["--echo", "--key-pass-env", "KP"], cert: client.cert, key: client.encryptedKey,
                                                environment: ["KP": passphrase])
        // This server presents the client certificate (no localhost in it): -k.
        let ours = try runWspipe(["-k", "wss://127.0.0.1:\(port)/"], stdin: .bytes(Array("secret kept\n".utf8)))
        assertStdout(ours, "secret kept\n")
        let stderr = stop(server)
        XCTAssertFalse(stderr.contains(passphrase))

        let passFile = path("pass")
        try (passphrase + "\n").write(toFile: passFile, atomically: false, encoding: .utf8)
        let (fromFile, _) = try startTLSServer(["--echo", "--key-pass-file", passFile], cert: client.cert, key: client.encryptedKey)
        _ = stop(fromFile)
        // The right passphrase of a key that is not the certificate's: a mismatch, not a wrong passphrase.
        let mismatch = try runWspipe(["-l", "0", "--cert", client.server.serverCert, "--key", client.encryptedKey,
                                      "--key-pass-env", "KP", "--echo"], environment: ["KP": passphrase])
        assertExit(mismatch, 4)
        assertStderr(mismatch, contains: "does not belong to the certificate")
    }

    func testWrongPairsAndFilesFailBeforeListening() throws {
        let client = try ClientTLSMaterial.shared()
        let tls = client.server
        let cases: [(arguments: [String], status: Int32, message: String)] = [
            (["--cert", tls.serverCert, "--key", tls.otherKey],
             4, "the private key in '\(tls.otherKey)' does not belong to the certificate in '\(tls.serverCert)'"),
            (["--cert", tls.serverKey, "--key", tls.serverKey], 4, "cannot load the server certificate from '\(tls.serverKey)'"),
            (["--cert", tls.serverCert, "--key", tls.caCert], 4, "cannot load the server's private key from '\(tls.caCert)'"),
            (["--cert", tls.serverCert], 4, "no private key in '\(tls.serverCert)'"),
            (["--cert", tls.serverCert, "--key", tls.serverKey, "--client-ca", tls.serverKey],
             4, "cannot load the client CA certificates from '\(tls.serverKey)' (--client-ca)"),
            (["--cert", path("missing.pem"), "--key", tls.serverKey], 2, "cannot read --cert file '\(path("missing.pem"))'"),
            (["--client-ca", tls.caCert], 2, "--client-ca with -l needs --cert (the server's certificate) to serve wss://"),
        ]
        for (arguments, status, message) in cases {
            let result = try runWspipe(["-l", "0", "--echo"] + arguments)
            XCTAssertEqual(result.exitCode, status, "\(arguments): \(result)")
            XCTAssertTrue(result.stderr.hasPrefix("wspipe: " + message), "\(arguments): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("listening"), result.stderr)
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, "one line: \(result.stderr)")
        }
    }

    func testPlainClientsAndGarbageCloseOnlyTheirConnection() throws {
        let tls = try TLSMaterial.shared()
        let (server, port) = try startTLSServer(["--echo", "-v"])
        // A ws:// client gets a plain 400 that says why.
        let plain = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("x\n".utf8)))
        assertExit(plain, 5)
        assertStderr(plain, contains: "the server answered 400 Bad Request")
        assertStderr(plain, contains: "this server speaks TLS: use wss://")
        XCTAssertEqual(try tlsClient(["garbage", String(port)]), "closed\n")
        XCTAssertEqual(try tlsClient(["echo", "wss://localhost:\(port)/", tls.caCert]), Self.echoed, "the server still serves")
        let stderr = stop(server)
        XCTAssertTrue(stderr.contains("TLS handshake with 127.0.0.1:"), stderr)
        XCTAssertTrue(stderr.contains("failed: http request"), stderr)
    }

    func testMinimumVersion13RefusesATLS12Client() throws {
        let tls = try TLSMaterial.shared()
        let (strict, strictPort) = try startTLSServer(["--echo", "--tls-min", "1.3"])
        XCTAssertTrue(try tlsClient(["version", String(strictPort), tls.caCert, "1.2"]).hasPrefix("refused "))
        XCTAssertEqual(try tlsClient(["version", String(strictPort), tls.caCert, "1.3"]), "ok TLSv1.3\n")
        _ = stop(strict)
        let (lenient, port) = try startTLSServer(["--echo"])
        XCTAssertEqual(try tlsClient(["version", String(port), tls.caCert, "1.2"]), "ok TLSv1.2\n")
        _ = stop(lenient)
    }

    /// A client that never sends its ClientHello is dropped at the handshake timeout, and
    /// meanwhile the loop serves others.
    func testStalledTLSHandshakeIsDroppedWithoutBlockingOthers() throws {
        let tls = try TLSMaterial.shared()
        let (server, port) = try startTLSServer(["--echo", "--handshake-timeout", "1", "-v"])
        let staller = try ChildProcess(executable: Locations.python,
                                       arguments: ["\(Locations.peers)/tls_client.py", "stall", String(port), "10"],
                                       environment: Locations.baseEnvironment, stdin: .null)
        let ours = try runWspipe(["--cacert", tls.caCert, "wss://localhost:\(port)/"], stdin: .bytes(Array("meanwhile\n".utf8)))
        assertStdout(ours, "meanwhile\n")
        let stalled = finish(staller).stdoutText
        XCTAssertTrue(stalled.hasPrefix("closed after 1.") || stalled.hasPrefix("closed after 0.9"), stalled)
        let stderr = stop(server)
        XCTAssertTrue(stderr.contains("failed: \(String(cString: strerror(ETIMEDOUT)))"), stderr)
    }

    /// wss:// to a plain listener: the ClientHello's first byte (0x16) cannot start a
    /// request, so the server shuts its side at once (it waited its whole handshake timeout
    /// for a head: the client failed after 10 s, without -k with a timeout, exit 3).
    func testWSSToAPlainServerFailsAtOnceWithThePlainServerHint() throws {
        let (server, port) = try startListening(["--echo", "-v", "--handshake-timeout", "5"])
        for extra in [[], ["-k"]] {
            let result = try runWspipe(extra + ["--connect-timeout", "5", "wss://127.0.0.1:\(port)/"],
                                       stdin: .bytes(Array("x\n".utf8)))
            assertExit(result, 4)
            assertStderr(result, contains: "the server closed the TLS session (is it a plain server? use ws:// for one)")
            XCTAssertLessThan(result.elapsed, 3, "refused at its first byte, not at a timeout (\(extra))")
        }
        // The listener still serves ws:// clients.
        assertStdout(try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("plain\n".utf8))), "plain\n")
        let stderr = stop(server)
        XCTAssertEqual(stderr.components(separatedBy: "the first byte 0x16 cannot start an HTTP request (a TLS handshake: "
                                                       + "wss:// to this ws:// listener)").count - 1, 2, stderr)
    }
}
