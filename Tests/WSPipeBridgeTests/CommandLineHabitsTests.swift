// The parser's help for websocat and wscat habits, without sockets: the nearest option,
// their flags, and HOST:PORT without a scheme.
import WebSocketCore
import XCTest
@testable import WSPipeBridge
@testable import WSPipeCLI

final class CommandLineHabitsTests: XCTestCase {
    private func message(_ arguments: [String], environment: [String: String] = [:]) -> String? {
        do {
            _ = try CommandLineParser.parse(arguments, environment: { environment[$0] })
            return nil
        } catch {
            return error.message
        }
    }

    func testEditDistance() {
        XCTAssertEqual(Habits.editDistance("--tiemout", "--timeout", limit: 2), 2)
        XCTAssertEqual(Habits.editDistance("--timeout", "--timeout", limit: 2), 0)
        XCTAssertEqual(Habits.editDistance("--timout", "--timeout", limit: 2), 1)
        XCTAssertEqual(Habits.editDistance("--verbos", "--verbose", limit: 2), 1)
        XCTAssertEqual(Habits.editDistance("--nope", "--path", limit: 2), 3, "past the limit: limit + 1")
        XCTAssertEqual(Habits.editDistance("--a", "--abcdef", limit: 2), 3)
        XCTAssertEqual(Habits.editDistance("", "ab", limit: 2), 2)
    }

    func testMisspelledLongOptionsGetTheNearest() {
        XCTAssertEqual(message(["--tiemout", "3", "ws://h/"]), "unknown option '--tiemout'; did you mean --timeout?")
        XCTAssertEqual(message(["--max-mesages=3", "ws://h/"]), "unknown option '--max-mesages'; did you mean --max-messages?")
        XCTAssertEqual(message(["--recconect", "ws://h/"]), "unknown option '--recconect'; did you mean --reconnect?")
        XCTAssertEqual(message(["--statc", "www", "-l", "8080"]), "unknown option '--statc'; did you mean --stats or --static?",
                       "equally near: both, in --help order")
        XCTAssertEqual(message(["--nope", "ws://h/"]), "unknown option '--nope'", "nothing within two edits")
        XCTAssertEqual(message(["--zzzzzzzzzz", "ws://h/"]), "unknown option '--zzzzzzzzzz'")
        XCTAssertEqual(message(["--ca", "x", "ws://h/"]), "unknown option '--ca'; wscat's --ca FILE is --cacert FILE",
                       "not '--sh': every letter would change")
        XCTAssertEqual(message(["--e", "ws://h/"]), "unknown option '--e'")
        XCTAssertEqual(message(["--ech", "ws://h/"]), "unknown option '--ech'; did you mean --echo?")
        XCTAssertEqual(message(["-timeout", "3", "ws://h/"]), "unknown option '-i'; did you mean --timeout?")
        XCTAssertEqual(message(["-tiemout=3", "ws://h/"]), "unknown option '-i'; did you mean --timeout?")
        XCTAssertEqual(message(["-unix-socket", "/s", "ws://h/"]), "unknown option '-u'; did you mean --unix-socket?",
                       "the long option written with one dash before websocat's -u")
        XCTAssertEqual(message(["-u", "ws://h/"]), "unknown option '-u'; websocat's -u is --send-only")
    }

    func testWebsocatFlagsNameWspipesEquivalents() {
        XCTAssertEqual(message(["-s", "8080"]), "unknown option '-s'; websocat's -s PORT is wspipe -l PORT "
                       + "(standard input and output to one client at a time; -l PORT --echo for an echo server); "
                       + "wscat's -s NAME is --protocol NAME")
        XCTAssertTrue(message(["--server-mode", "8080"])?.contains("websocat's --server-mode PORT is wspipe -l PORT") == true)
        XCTAssertTrue(message(["-vE", "ws://h/"])?.hasPrefix("unknown option '-E'; websocat's -E is what wspipe does by default") == true)
        XCTAssertEqual(message(["-n", "ws://h/"]), "-n/--max-messages takes a number of messages, not the URL 'ws://h/' "
                       + "(websocat's -n is wspipe's --no-close, wscat's -n is -k)")
        XCTAssertEqual(message(["--max-messages", "wss://u:pw@h/"]), "-n/--max-messages takes a number of messages, "
                       + "not the URL 'wss://[redacted]@h/' (websocat's -n is wspipe's --no-close, wscat's -n is -k)")
        XCTAssertEqual(message(["-n", "x", "ws://h/"]), "--max-messages 'x' is not a positive number of messages")
    }

    func testSchemelessAddresses() {
        XCTAssertEqual(SchemelessAddress("localhost:8080")?.url, "ws://localhost:8080/")
        XCTAssertEqual(SchemelessAddress("127.0.0.1:80/a/b?c=d")?.url, "ws://127.0.0.1:80/a/b?c=d")
        XCTAssertEqual(SchemelessAddress("[::1]:9000/x")?.url, "ws://[::1]:9000/x")
        XCTAssertEqual(SchemelessAddress("localhost:8080?room=1")?.url, "ws://localhost:8080/?room=1")
        XCTAssertEqual(SchemelessAddress("h:1/a?next=http://x/")?.url, "ws://h:1/a?next=http://x/")
        XCTAssertEqual(SchemelessAddress("h:1#f")?.url, "ws://h:1/#f", "the URL parser refuses the fragment")
        XCTAssertEqual(SchemelessAddress("u@h:1")?.hasPassword, false)
        XCTAssertEqual(SchemelessAddress("u:p@h:1")?.hasPassword, true)
        XCTAssertEqual(SchemelessAddress("my-host.example:443")?.url, "ws://my-host.example:443/")
        let credentialed = SchemelessAddress("u:p@h:1/x")
        XCTAssertEqual(credentialed?.hasUserInfo, true)
        XCTAssertEqual(credentialed?.shown, "[redacted]@h:1/x")
        XCTAssertEqual(credentialed?.url, "ws://h:1/x")
        for text in ["localhost", "ws://h:1/", "h:", "h:port", ":80", "-h:80", "h_x:80", "[::1]80", "::1:80", "h:123456", "/p:80", "h:80x"] {
            XCTAssertNil(SchemelessAddress(text), text)
        }
    }

    func testHostAndPortAreTakenAsWSUnlessCredentialsGoWithThem() throws {
        guard case .run(let config) = try CommandLineParser.parse(["localhost:8080/feed"]) else { return XCTFail("not a run") }
        XCTAssertEqual(config.client.url.description, "ws://localhost:8080/feed")
        XCTAssertEqual(config.client.schemeTakenFrom, "localhost:8080/feed")
        guard case .run(let plain) = try CommandLineParser.parse(["ws://localhost:8080/"]) else { return XCTFail("not a run") }
        XCTAssertNil(plain.client.schemeTakenFrom)

        let refusal = "has no scheme, and %@ would go with it in clear as ws://: write wss://, or ws:// to send it unencrypted on purpose"
        XCTAssertEqual(message(["u:p@h:1"]), "'[redacted]@h:1' " + refusal.replacingOccurrences(of: "%@", with: "user:password@"))
        XCTAssertEqual(message(["--bearer", "t", "h:1"]), "'h:1' " + refusal.replacingOccurrences(of: "%@", with: "a bearer token"))
        XCTAssertEqual(message(["h:1"], environment: ["WSPIPE_BEARER": "t"]),
                       "'h:1' " + refusal.replacingOccurrences(of: "%@", with: "a bearer token"))
        XCTAssertEqual(message(["-H", "Cookie: s=1", "h:1"]), "'h:1' " + refusal.replacingOccurrences(of: "%@", with: "-H Cookie"))
        XCTAssertNil(message(["--bearer", "t", "wss://h:1/"]), "a scheme written out is the user's choice")
        XCTAssertNil(message(["-H", "X-Trace: 1", "h:1"]), "a header that is not secret")
    }

    /// TLS asked for (an option, port 443) with an address that would be ws://: said, not
    /// ignored (wscat takes host:443 as ws:// and fails at the handshake).
    func testHostAndPortAreNotTakenAsWSWhenTLSIsAskedFor() {
        XCTAssertEqual(message(["-k", "h:8443"]),
                       "'h:8443' has no scheme, and --insecure is for TLS, which ws:// does not use: write wss://")
        XCTAssertEqual(message(["--cacert", "/etc/hosts", "h:1/x"]),
                       "'h:1/x' has no scheme, and --cacert is for TLS, which ws:// does not use: write wss://")
        XCTAssertEqual(message(["h:443/feed"]),
                       "'h:443/feed' has no scheme, and port 443 is wss://'s: write wss://, or ws:// for WebSocket without TLS on that port on purpose")
        XCTAssertNil(message(["-k", "wss://h:8443/"]))
        XCTAssertNil(message(["ws://h:443/"]), "a scheme written out is the user's choice")
    }
}
