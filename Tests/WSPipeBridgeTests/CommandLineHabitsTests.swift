// The parser's help for websocat and wscat habits, without sockets: the nearest option,
// their flags, and HOST:PORT without a scheme.
import WebSocketCore
import WebSocketTransport
import XCTest
@testable import WSPipeBridge
@testable import WSPipeCLI

/// The usage error's message for `arguments`; nil when they parse.
private func message(_ arguments: [String], environment: [String: String] = [:]) -> String? {
    do {
        _ = try CommandLineParser.parse(arguments, environment: { environment[$0] })
        return nil
    } catch {
        return error.message
    }
}

final class CommandLineHabitsTests: XCTestCase {

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
        XCTAssertEqual(message(["-tiemout=3", "ws://h/"]), "unknown option '-tiemout'; did you mean --timeout?",
                       "near a long option: named as typed")
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

    /// wscat's console habits (--no-color, -P, --slash, -w) were "unknown option" and nothing more.
    func testWscatConsoleFlagsNameWspipesEquivalents() {
        XCTAssertTrue(message(["--no-color", "ws://h/"])?.hasPrefix("unknown option '--no-color'; wscat's --no-color is NO_COLOR=1 "
                       + "(wspipe colours only its console, at a terminal)") == true)
        XCTAssertTrue(message(["-P", "ws://h/"])?.hasPrefix("unknown option '-P'; wscat's -P is -v") == true)
        XCTAssertTrue(message(["--show-ping-pong", "ws://h/"])?.contains("wscat's --show-ping-pong is -v") == true)
        XCTAssertTrue(message(["--slash", "ws://h/"])?.contains("wscat's --slash is always on in wspipe's console") == true)
        XCTAssertTrue(message(["-w", "2", "ws://h/"])?.hasPrefix("unknown option '-w'; wscat's -w SECS is --linger SECS") == true)
        XCTAssertTrue(message(["--wait", "2", "ws://h/"])?.contains("wscat's --wait SECS is --linger SECS") == true)
    }

    /// websocketd's flags that wspipe names otherwise were "unknown option" alone (--ssl:
    /// "did you mean --sni or --sh?"), with two dashes or one (Go's flags take both).
    func testWebsocketdFlagsNameWspipesEquivalents() {
        let hints: [(String, String, String)] = [
            ("--address", "websocketd's --address ADDR (with --port PORT) is wspipe -l ADDR:PORT", "--listen"),
            ("--maxforks", "websocketd's --maxforks N is --max-children N", "--max-children"),
            ("--loglevel", "websocketd's --loglevel LEVEL is -v (each client and how it ended, on stderr: debug to info) "
                + "or -q (errors only: error, fatal)", "--quiet"),
            ("--ssl", "websocketd's --ssl --sslcert FILE --sslkey FILE is --cert FILE --key FILE (with -l: serve wss://)", "--cert"),
            ("--sslcert", "is --cert FILE --key FILE", "--key"),
            ("--sslkey", "is --cert FILE --key FILE", "--key"),
            ("--closems", "websocketd's --closems MS is --close-grace SECS", "--close-grace"),
            ("--header-ws", "websocketd's --header-ws 'Name: value' is --response-header 'Name: value'", "--response-header"),
        ]
        for (flag, hint, option) in hints {
            XCTAssertNotNil(Option.named(option), option)
            for typed in [flag, String(flag.dropFirst())] {
                let said = message([typed, "x", "--port=8080"]) ?? ""
                XCTAssertTrue(said.hasPrefix("unknown option '\(typed)'; ") && said.contains(hint), said)
            }
            XCTAssertTrue(message([flag + "=x", "-l", "8080"])?.contains(hint) == true, flag)
        }
        XCTAssertEqual(message(["-port=8080", "./count.sh"]),
                       "unknown option '-port'; websocketd's --port=8080 ./count.sh is wspipe -l 8080 --exec ./count.sh",
                       "was: did you mean --cert?")
        XCTAssertEqual(message(["-port", "8080"]),
                       "unknown option '-port'; websocketd's --port 8080 is wspipe -l 8080 (with --exec PROGRAM to run a program for each client)")
        XCTAssertEqual(message(["-l", "8080", "--header", "X-A: 1"]), "--header is a client option; it cannot be used with "
                       + "-l/--listen (a header of the 101 answer, as websocketd's --header: --response-header)")
    }

    /// websocat's '-' (standard input and output) was "more than one URL given" after a URL,
    /// and after short flags (-b-) "unknown option '--'".
    func testWebsocatsDashForStandardStreams() {
        let said = "websocat's '-' (standard input and output) is what wspipe always bridges: give the URL alone"
        XCTAssertEqual(message(["-b", "ws://h/", "-"]), "'-' is no URL; " + said)
        XCTAssertEqual(message(["-", "ws://h/"]), "'-' is no URL; " + said)
        XCTAssertEqual(message(["-b-", "ws://h/"]), "'-' in '-b-' is no option; " + said)
        XCTAssertEqual(message(["-l", "8080", "cat", "-"]), "-l takes no URL, and 'cat' is not one; to run a program for each "
                       + "client, write wspipe -l 8080 --exec cat -", "a program's argument")
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

/// Issue 35, items 5 and 6: websocketd's, wscat's, websocat's and websockify's ways of
/// writing things, and single-dash long options.
final class CommandLineNewcomerTests: XCTestCase {

    private func config(_ arguments: [String], notes: inout [String]) throws -> BridgeConfiguration {
        var said: [String] = []
        defer { notes = said }
        guard case .run(let config) = try CommandLineParser.parse(arguments, note: { said.append($0) }) else {
            throw UsageError("not a run")
        }
        return config
    }

    private func config(_ arguments: [String]) throws -> BridgeConfiguration {
        var notes: [String] = []
        return try config(arguments, notes: &notes)
    }

    /// An --allow-origin that no browser can send (a bare host, a trailing slash) was
    /// accepted, and every browser got 403.
    func testAllowOriginMustBeAnOrigin() throws {
        XCTAssertEqual(message(["-l", "0", "--echo", "--allow-origin", "good.example"]),
                       "--allow-origin 'good.example' is not an origin: write it as a browser sends it, scheme://host[:port] "
                       + "(e.g. https://good.example)")
        XCTAssertEqual(message(["-l", "0", "--echo", "--allow-origin", "https://good.example/"]),
                       "--allow-origin 'https://good.example/' is not an origin: an Origin has no path, not even '/' "
                       + "(write https://good.example)")
        for origin in ["https://good.example", "http://127.0.0.1:8080", "null", "chrome-extension://abc"] {
            XCTAssertNoThrow(try config(["-l", "0", "--echo", "--allow-origin", origin]), origin)
        }
    }

    func testWebsocketdsPortAndProgramNameListenAndExec() {
        XCTAssertEqual(message(["--port=8080", "./count.sh"]),
                       "unknown option '--port'; websocketd's --port=8080 ./count.sh is wspipe -l 8080 --exec ./count.sh")
        XCTAssertEqual(message(["--port", "8080", "--devconsole", "./count.sh", "a b"]),
                       "unknown option '--port'; websocketd's --port 8080 ./count.sh 'a b' is wspipe -l 8080 --exec ./count.sh 'a b'")
        XCTAssertEqual(message(["--port=8080"]),
                       "unknown option '--port'; websocketd's --port=8080 is wspipe -l 8080 (with --exec PROGRAM to run a program for each client)")
        XCTAssertEqual(message(["-l", "127.0.0.1:0", "./count.sh"]),
                       "-l takes no URL, and './count.sh' is not one; to run a program for each client, write "
                       + "wspipe -l 127.0.0.1:0 --exec ./count.sh")
        XCTAssertEqual(message(["./count.sh", "x", "-l", "8080"]),
                       "-l takes no URL, and './count.sh' is not one; to run a program for each client, write "
                       + "wspipe -l 8080 --exec ./count.sh x")
        XCTAssertEqual(message(["-l", "0", "ws://h/"]), "a URL ('ws://h/') cannot be combined with -l/--listen")
        XCTAssertEqual(message(["./count.sh", "ws://h/"]), "more than one URL given: './count.sh' and 'ws://h/'")
        XCTAssertEqual(message(["a", "b"]), "more than one URL given: 'a' and 'b'")
    }

    func testSingleDashLongOptionsAreNamedAsTyped() {
        XCTAssertEqual(message(["-timeout", "5", "ws://h/"]), "unknown option '-timeout'; long options take two dashes: --timeout")
        XCTAssertEqual(message(["-timeout=5", "ws://h/"]), "unknown option '-timeout'; long options take two dashes: --timeout")
        XCTAssertEqual(message(["-unix-socket", "/s", "ws://h/"]), "unknown option '-unix-socket'; long options take two dashes: --unix-socket")
        XCTAssertEqual(message(["-verbose", "ws://h/"]), "unknown option '-verbose'; long options take two dashes: --verbose")
        XCTAssertEqual(message(["-u", "ws://h/"]), "unknown option '-u'; websocat's -u is --send-only")
        XCTAssertNil(message(["-vb", "ws://h/"]), "short flags still combine")
        XCTAssertNil(message(["-kn3", "ws://h/"]))
    }

    func testWscatsDashCIsTakenWithANote() throws {
        var notes: [String] = []
        XCTAssertEqual(try config(["-c", "ws://h:1/x"], notes: &notes).client.url.description, "ws://h:1/x")
        XCTAssertEqual(notes, ["wscat's -c: the URL alone is enough"])
        XCTAssertEqual(try config(["--connect", "localhost:8080"], notes: &notes).client.url.description, "ws://localhost:8080/")
        XCTAssertEqual(notes, ["wscat's --connect: the URL alone is enough"])
        XCTAssertEqual(message(["-c", "ws://a/", "ws://b/"]), "more than one URL given: 'ws://a/' and 'ws://b/'")
        XCTAssertEqual(message(["-c"]), "option -c needs a value")
    }

    func testWebsocatsAutoreconnectNamesReconnect() {
        XCTAssertEqual(message(["autoreconnect:ws://u:pw@h/feed"]),
                       "websocat's 'autoreconnect:ws://[redacted]@h/feed' is wspipe --reconnect ws://[redacted]@h/feed")
    }

    func testWebsockifysForwardTargetIsTCP() throws {
        guard case .forward(let serving)? = try config(["-l", "0", "--forward", "127.0.0.1:5900"]).serve?.mode else {
            return XCTFail("not --forward")
        }
        XCTAssertEqual(serving.target, StreamTarget(parsing: "tcp:127.0.0.1:5900"))
        guard case .forward(let v6)? = try config(["-l", "0", "--forward", "[::1]:5900"]).serve?.mode else { return XCTFail("not --forward") }
        XCTAssertEqual(v6.target, StreamTarget(parsing: "tcp:[::1]:5900"))
    }

    func testListenAddressesWithoutAnAddressOrWithLocalhost() throws {
        XCTAssertEqual(message(["-l", ":8080"]),
                       "-l ':8080' names no address: -l 8080 listens on loopback (127.0.0.1), -l 0.0.0.0:8080 on every interface")
        XCTAssertEqual(message(["--listen", ":0", "--echo"]),
                       "-l ':0' names no address: -l 0 listens on loopback (127.0.0.1), -l 0.0.0.0:0 on every interface")
        let serve = try XCTUnwrap(try config(["-l", "localhost:8080", "--echo"]).serve)
        XCTAssertEqual(serve.listen, .tcp(address: "127.0.0.1", port: 8080))
        XCTAssertTrue(serve.alsoIPv6Loopback)
        XCTAssertFalse(try XCTUnwrap(try config(["-l", "127.0.0.1:8080", "--echo"]).serve).alsoIPv6Loopback)
    }

    func testUnixPathIsAUnixSocketURL() throws {
        let url = try config(["unix:/run/app.sock"]).client.url
        XCTAssertEqual(url.unixSocketPath, "/run/app.sock")
        XCTAssertEqual(url.hostHeader, "localhost")
        XCTAssertEqual(url.requestTarget, "/")
        XCTAssertEqual(url.description, "ws+unix:///run/app.sock:/")
        XCTAssertEqual(try config(["unix:/tmp/a:b%c"]).client.url.unixSocketPath, "/tmp/a:b%c", "':' and '%' are the path's")
    }
}
