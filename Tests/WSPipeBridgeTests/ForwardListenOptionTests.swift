// --forward-listen [ADDR:]PORT URL: what it takes (the client options) and what it refuses,
// each with why.
import WebSocketTransport
import XCTest
@testable import WSPipeBridge
@testable import WSPipeCLI

final class ForwardListenOptionTests: XCTestCase {
    private func config(_ arguments: [String], environment: [String: String] = [:]) throws -> BridgeConfiguration {
        guard case .run(let config) = try CommandLineParser.parse(arguments, environment: { environment[$0] }) else {
            throw UsageError("not a run")
        }
        return config
    }

    private func message(_ arguments: [String]) -> String? {
        do {
            _ = try CommandLineParser.parse(arguments)
            return nil
        } catch {
            return error.message
        }
    }

    func testTheAddressDefaultsToLoopbackAndTheClientOptionsApply() throws {
        let plain = try config(["--forward-listen", "2222", "wss://gw.example/ssh"])
        XCTAssertEqual(plain.forwardListen, .tcp(address: "127.0.0.1", port: 2222))
        XCTAssertNil(plain.serve)
        XCTAssertEqual(plain.client.url.description, "wss://gw.example/ssh")
        let options = try config(["--forward-listen", "[::1]:0", "-H", "X-A: 1", "--protocol", "binary", "--connect-to", "h:1",
                                  "--ping-interval", "5", "wss://gw.example/ssh"], environment: ["WSPIPE_BEARER": "t"])
        XCTAssertEqual(options.forwardListen, .tcp(address: "::1", port: 0))
        XCTAssertEqual(options.client.headers.map(\.name), ["X-A"])
        XCTAssertEqual(options.client.bearerToken, "t")
        XCTAssertEqual(options.subprotocols, ["binary"])
        XCTAssertEqual(options.pingInterval, 5)
        XCTAssertNotNil(options.client.network.connectTo)
        XCTAssertEqual(try config(["--forward-listen", "0.0.0.0:9", "ws://h/"]).forwardListen, .tcp(address: "0.0.0.0", port: 9))
    }

    func testOnlyATCPAddress() {
        XCTAssertEqual(message(["--forward-listen", "unix:/tmp/s", "ws://h/"]), "--forward-listen takes a TCP [ADDR:]PORT ('unix:/tmp/s' is not one)")
        XCTAssertEqual(message(["--forward-listen", "fd:3", "ws://h/"]), "--forward-listen takes a TCP [ADDR:]PORT ('fd:3' is not one)")
        XCTAssertEqual(message(["--forward-listen", "host.example:22", "ws://h/"]),
                       "--forward-listen 'host.example' is not an IP address (listeners bind to addresses, not names)")
        XCTAssertEqual(message(["--forward-listen", "x", "ws://h/"]), "--forward-listen 'x' is not a port (0-65535)")
        XCTAssertEqual(message(["--forward-listen", "22"]), "no URL given; usage: wspipe [options] ws://host[:port]/path")
    }

    func testReconnectDoesNotApply() {
        for option in [["--reconnect"], ["--retry-delay", "1"], ["--queue-size", "5"], ["--max-retries", "2"]] {
            XCTAssertEqual(message(["--forward-listen", "0"] + option + ["ws://h/"]),
                           "\(option[0]) does not apply to --forward-listen: each TCP connection opens its WebSocket once, "
                           + "and one that fails or ends closes that connection (its program may connect again)")
        }
    }

    func testStdioOptionsHaveNoMeaning() {
        for option in [["-b"], ["--text"], ["--jsonl"], ["-n", "3"], ["-1"], ["--send", "x"], ["--no-close"], ["--stats"],
                       ["--close-code", "4000"], ["--receive-only"], ["--timeout", "3"], ["--base64"]] {
            let text = message(["--forward-listen", "0"] + option + ["ws://h/"]) ?? ""
            XCTAssertTrue(text.hasSuffix("has no meaning with --forward-listen: each TCP connection's bytes are the binary messages "
                                         + "of its own WebSocket, with no stdin or stdout"), "\(option): \(text)")
        }
    }

    func testNotAServer() {
        XCTAssertEqual(message(["--forward-listen", "0", "-l", "0"]),
                       "--forward-listen cannot be combined with -l/--listen: it listens for TCP and is a client of URL "
                       + "(a WebSocket server that forwards to TCP is -l with --forward)")
        XCTAssertEqual(message(["--forward-listen", "0", "-l", "0", "ws://h/"]),
                       "--forward-listen cannot be combined with -l/--listen: it listens for TCP and is a client of URL "
                       + "(a WebSocket server that forwards to TCP is -l with --forward)")
        XCTAssertEqual(message(["--forward-listen", "0", "--echo", "ws://h/"]),
                       "--echo is a server option; --forward-listen is a client of URL")
        XCTAssertEqual(message(["--forward-listen", "0", "--forward", "tcp:127.0.0.1:22", "ws://h/"]),
                       "--forward is a server option; --forward-listen is a client of URL")
    }
}
