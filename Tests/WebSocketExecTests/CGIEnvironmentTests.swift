import WebSocketCore
import WebSocketExec
import XCTest

final class CGIEnvironmentTests: XCTestCase {
    func request(_ target: String, headers: [(String, String)]) throws -> HandshakeRequest {
        var text = "GET \(target) HTTP/1.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        var handshake = ServerHandshake()
        let bytes = Array(text.utf8)
        var index = 0
        let request = try bytes.withUnsafeBytes { try handshake.receive($0, &index) }
        // A whole head that does not parse is a parser regression: a failure, never a skip.
        return try XCTUnwrap(request, "the handshake parser found no complete request in \(text.debugDescription)")
    }

    let upgrade = [("Host", "example.com:8080"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                   ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")]

    func variables(_ request: HandshakeRequest, _ connection: ConnectionFacts, software: String) -> [String: String] {
        Dictionary(CGIEnvironment.variables(for: request, connection: connection, serverSoftware: software),
                   uniquingKeysWith: { first, _ in first })
    }

    func facts(tls: Bool = false) -> ConnectionFacts {
        ConnectionFacts(remoteAddress: "192.0.2.7", remotePort: 51234, localAddress: "127.0.0.1", localPort: 8080,
                        isTLS: tls, uniqueID: "42")
    }

    /// --require-bearer: the token is the server's secret, so programs do not get it in
    /// HTTP_AUTHORIZATION (they did, every program, every client); AUTH_TYPE says the server
    /// checked it. Without the check the header passes as websocketd passes it.
    func testACheckedBearerTokenIsNotPassedToPrograms() throws {
        let request = try request("/", headers: upgrade + [("Authorization", "Bearer topsecret")])
        var checked = facts()
        checked.bearerChecked = true
        let withheld = variables(request, checked, software: "wspipe/1.0")
        XCTAssertNil(withheld["HTTP_AUTHORIZATION"])
        XCTAssertEqual(withheld["AUTH_TYPE"], "Bearer")
        XCTAssertFalse(withheld.values.contains { $0.contains("topsecret") })
        let passed = variables(request, facts(), software: "wspipe/1.0")
        XCTAssertEqual(passed["HTTP_AUTHORIZATION"], "Bearer topsecret")
        XCTAssertEqual(passed["AUTH_TYPE"], "")
    }

    func testWebsocketdVariables() throws {
        let request = try request("/a%20b/c?x=1&y=%20", headers: upgrade + [("X-Multi", "one"), ("x-multi", " two "),
                                                                          ("X-Dash-Name", "v"), ("Proxy", "http://evil")])
        let env = variables(request, facts(), software: "wspipe/1.0")
        XCTAssertEqual(env["SERVER_SOFTWARE"], "wspipe/1.0")
        XCTAssertEqual(env["REMOTE_ADDR"], "192.0.2.7")
        XCTAssertEqual(env["REMOTE_HOST"], "192.0.2.7", "no reverse lookup")
        XCTAssertEqual(env["REMOTE_PORT"], "51234")
        XCTAssertEqual(env["SERVER_NAME"], "example.com")
        XCTAssertEqual(env["SERVER_PORT"], "8080")
        XCTAssertEqual(env["SERVER_PROTOCOL"], "HTTP/1.1")
        XCTAssertEqual(env["GATEWAY_INTERFACE"], "CGI/1.1")
        XCTAssertEqual(env["REQUEST_METHOD"], "GET")
        XCTAssertEqual(env["REQUEST_URI"], "/a%20b/c?x=1&y=%20")
        XCTAssertEqual(env["SCRIPT_NAME"], "/")
        XCTAssertEqual(env["PATH_INFO"], "/a b/c")
        XCTAssertEqual(env["PATH_TRANSLATED"], "/a b/c")
        XCTAssertEqual(env["QUERY_STRING"], "x=1&y=%20")
        for empty in ["AUTH_TYPE", "CONTENT_LENGTH", "CONTENT_TYPE", "REMOTE_IDENT", "REMOTE_USER"] {
            XCTAssertEqual(env[empty], "", empty)
        }
        XCTAssertEqual(env["UNIQUE_ID"], "42")
        XCTAssertNil(env["HTTPS"])
        XCTAssertEqual(env["HTTP_X_MULTI"], "one, two", "repeats joined, values trimmed")
        XCTAssertEqual(env["HTTP_X_DASH_NAME"], "v")
        XCTAssertEqual(env["HTTP_HOST"], "example.com:8080")
        XCTAssertEqual(env["HTTP_SEC_WEBSOCKET_VERSION"], "13")
        XCTAssertNil(env["HTTP_PROXY"], "httpoxy")
        XCTAssertNil(env["WEBSOCKET_PROTOCOL"])
        XCTAssertNil(env["SSL_CLIENT_S_DN"])
    }

    func testDirProgramsScriptNameAndPathInfoSplitThePath() throws {
        let request = try request("/sub/deep/x%20y?q=1", headers: upgrade)
        let env = Dictionary(CGIEnvironment.variables(for: request, connection: facts(), serverSoftware: "wspipe/1.0",
                                                      script: ("/sub/deep", "/x y", "/srv/ws/sub/deep")),
                             uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(env["SCRIPT_NAME"], "/sub/deep")
        XCTAssertEqual(env["PATH_INFO"], "/x y")
        XCTAssertEqual(env["PATH_TRANSLATED"], "/sub/deep/x y", "websocketd's: the whole path, decoded")
        XCTAssertEqual(env["SCRIPT_FILENAME"], "/srv/ws/sub/deep")
        XCTAssertEqual(env["REQUEST_URI"], "/sub/deep/x%20y?q=1")
        XCTAssertNil(variables(request, facts(), software: "wspipe/1.0")["SCRIPT_FILENAME"], "only with --dir")
    }

    func testTLSSubprotocolAndClientCertificate() throws {
        var connection = facts(tls: true)
        connection.subprotocol = "chat.v2"
        connection.clientCertificateSubject = "CN=alice,O=Example"
        let request = try request("/", headers: upgrade.map { $0.0 == "Host" ? ("Host", "[::1]") : $0 })
        let env = variables(request, connection, software: "wspipe/1.0")
        XCTAssertEqual(env["HTTPS"], "on")
        XCTAssertEqual(env["SERVER_NAME"], "::1")
        XCTAssertEqual(env["SERVER_PORT"], "443", "no port in Host: the scheme's")
        XCTAssertEqual(env["WEBSOCKET_PROTOCOL"], "chat.v2")
        XCTAssertEqual(env["SSL_CLIENT_S_DN"], "CN=alice,O=Example")
        XCTAssertEqual(env["SSL_CLIENT_VERIFY"], "SUCCESS")
        XCTAssertEqual(env["QUERY_STRING"], "")
        XCTAssertEqual(env["REQUEST_URI"], "/")
    }

    func testChildEnvironmentPassesOnlyPATHAndNamedVariables() {
        let parent = ["PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8", "REMOTE_ADDR": "spoofed"]
        let env = CGIEnvironment.childEnvironment(cgi: [("REMOTE_ADDR", "1.2.3.4")], passing: ["LANG", "UNSET", "REMOTE_ADDR"],
                                                  parent: { parent[$0] })
        XCTAssertEqual(env, ["PATH=/bin", "LANG=C.UTF-8", "REMOTE_ADDR=1.2.3.4"])
    }

    func testHeaderValuesLoseLineBreaks() throws {
        // A folded (obs-fold) value is joined by the parser; CR/LF never reach the child.
        let request = try request("/", headers: upgrade + [("X-Folded", "a\r\n b")])
        let env = variables(request, facts(), software: "s")
        XCTAssertFalse(env["HTTP_X_FOLDED", default: ""].contains("\r") || env["HTTP_X_FOLDED", default: ""].contains("\n"))
    }

    func testAddressesAreSplit() {
        XCTAssertTrue(ConnectionFacts.split("127.0.0.1:8080") == ("127.0.0.1", 8080))
        XCTAssertTrue(ConnectionFacts.split("[::1]:443") == ("::1", 443))
        XCTAssertTrue(ConnectionFacts.split("[::1]:80") == ("::1", 80))
        XCTAssertTrue(ConnectionFacts.split("[::1]") == ("::1", nil))
        // Bad brackets give no address (an unclosed one read as "[:" port 1).
        XCTAssertTrue(ConnectionFacts.split("[::1") == ("", nil))
        XCTAssertTrue(ConnectionFacts.split("[::1]80") == ("", nil))
        XCTAssertTrue(ConnectionFacts.split("/run/app.sock") == ("", nil))
    }
}
