import Glibc
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

/// An `--echo` client that sends nothing after its handshake waits without a driver or a
/// handler (`ServerMode.parksIdleClients`): its first data, its Close, its hang-up or the
/// server's shutdown give it one, and nothing of the connection is lost on the way.
final class ParkedClientTests: XCTestCase {
    private typealias Pair = HandedOverClient<EchoMode>

    private func handedOver(configuration: ServerConfiguration = ServerConfiguration()) throws -> Pair {
        try Pair(configuration: configuration, mode: EchoMode())
    }

    private func frame(_ opcode: UInt8, _ payload: [UInt8]) -> [UInt8] { Pair.frame(opcode, payload) }

    func testAClientThatSendsNothingHasNoDriverUntilItSends() throws {
        let pair = try handedOver()
        defer { close(pair.client) }
        XCTAssertTrue(pair.connection.isParked)
        XCTAssertNil(pair.connection.activeDriver)
        XCTAssertNil(pair.connection.handler)
        XCTAssertEqual(pair.run(seconds: 0.2) { _ in false }, [])  // nothing comes: the loop turns and it stays parked
        XCTAssertTrue(pair.connection.isParked)
        // The metrics read every client's counts: a parked client is not woken for them.
        XCTAssertEqual(pair.server.totals.messagesReceived, 0)
        XCTAssertTrue(pair.connection.isParked)

        pair.send(frame(0x1, Array("hello".utf8)))
        let echo = pair.run { $0.count >= 7 }
        XCTAssertEqual(echo, [0x81, 0x05] + Array("hello".utf8))
        XCTAssertFalse(pair.connection.isParked)
        XCTAssertNotNil(pair.connection.activeDriver)
        XCTAssertEqual(pair.server.totals.messagesReceived, 1)
        pair.connection.activeDriver?.abandon()
    }

    func testAParkedClientsCloseIsAnswered() throws {
        let pair = try handedOver()
        defer { close(pair.client) }
        var ended: ConnectionEnding?
        pair.server.onEvent = { if case .disconnected(_, let ending) = $0 { ended = ending } }
        pair.send(frame(0x8, [0x03, 0xE8]))
        let answer = pair.run { $0.count >= 4 }
        XCTAssertEqual(answer, [0x88, 0x02, 0x03, 0xE8])
        shutdown(pair.client, Int32(SHUT_WR))
        _ = pair.run { _ in ended != nil }
        guard case .closed(let handshake)? = ended else { return XCTFail("ended: \(String(describing: ended))") }
        XCTAssertEqual(handshake.received.code, .normalClosure)
        XCTAssertFalse(handshake.initiatedByUs)
    }

    func testAParkedClientThatHangsUpEnds() throws {
        let pair = try handedOver()
        var ended: ConnectionEnding?
        pair.server.onEvent = { if case .disconnected(_, let ending) = $0 { ended = ending } }
        close(pair.client)
        let deadline = Instant.now().adding(seconds: 3)
        let tick = pair.loop.timer {}
        while ended == nil && Instant.now() < deadline {
            pair.loop.arm(tick, at: Instant.now().adding(seconds: 0.01))
            pair.loop.turn()
        }
        guard case .lost? = ended else { return XCTFail("ended: \(String(describing: ended))") }
    }

    func testTheServersShutdownClosesParkedClientsWith1001() throws {
        let pair = try handedOver()
        defer { close(pair.client) }
        XCTAssertTrue(pair.connection.isParked)
        pair.server.shutdown(ClosePayload(code: .goingAway), within: 2)
        let close = pair.run { $0.count >= 4 }
        XCTAssertEqual(close, [0x88, 0x02, 0x03, 0xE9])
    }

    /// --broadcast: parked clients get every message sent after their handshake (each is
    /// woken before the message joins the batch), and none sent before it.
    func testParkedBroadcastClientsGetWhatIsSentAfterTheyJoined() throws {
        let loop = try EventLoop()
        let mode = BroadcastMode(loop: loop)
        let server = ServerDriver(loop: loop, configuration: ServerConfiguration(), mode: mode)
        func join() throws -> (ServerConnection, Int32) {
            var fds: [Int32] = [-1, -1]
            XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
            let end = TCPStream(adopting: fds[0], remoteAddress: "pair")
            let request = try Pair.upgradeRequest()
            let connection = try XCTUnwrap(server.handOver(end, connection: end, clientAddress: .local(path: "pair"), request: request,
                                                           subprotocol: nil, deflate: nil, received: nil, parsed: 0))
            return (connection, fds[1])
        }
        let (first, firstClient) = try join()
        defer { close(firstClient) }
        XCTAssertTrue(first.isParked)
        XCTAssertEqual(mode.clientCount, 1)
        mode.send(.text, fin: true, bytes: Array("one".utf8))  // not flushed yet: the batch waits for the loop
        XCTAssertFalse(first.isParked)
        let (second, secondClient) = try join()
        defer { close(secondClient) }
        XCTAssertTrue(second.isParked)
        mode.send(.text, fin: true, bytes: Array("two".utf8))
        XCTAssertFalse(second.isParked)
        XCTAssertEqual(mode.clientCount, 2)
        var got: [Int32: [UInt8]] = [firstClient: [], secondClient: []]
        let deadline = Instant.now().adding(seconds: 3)
        let tick = loop.timer {}
        while (got[firstClient]!.count < 10 || got[secondClient]!.count < 5) && Instant.now() < deadline {
            loop.arm(tick, at: Instant.now().adding(seconds: 0.01))
            loop.turn()
            for fd in [firstClient, secondClient] {
                var chunk = [UInt8](repeating: 0, count: 256)
                let n = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
                if n > 0 { got[fd]! += chunk[..<n] }
            }
        }
        XCTAssertEqual(got[firstClient], [0x81, 0x03] + Array("one".utf8) + [0x81, 0x03] + Array("two".utf8))
        XCTAssertEqual(got[secondClient], [0x81, 0x03] + Array("two".utf8), "the second joined after 'one' was sent")
        first.activeDriver?.abandon()
        second.activeDriver?.abandon()
    }

    /// A parked client woken after its server's mode is gone (the server holds it weakly)
    /// has nobody to serve it: it gets 1001 and ends as any connection does (the server's
    /// table and its events), not a closed socket the server still counts as connected.
    func testAClientWokenAfterItsModeIsGoneGets1001AndEnds() throws {
        var pair = try handedOver()
        defer { close(pair.client) }
        XCTAssertTrue(pair.connection.isParked)
        var ended: ConnectionEnding?
        pair.server.onEvent = { if case .disconnected(_, let ending) = $0 { ended = ending } }
        pair.releaseMode()
        XCTAssertNil(pair.server.mode)
        pair.send(frame(0x1, Array("hello".utf8)))
        XCTAssertEqual(pair.run { $0.count >= 4 }, [0x88, 0x02, 0x03, 0xE9], "a Close with 1001 going away")
        pair.send(frame(0x8, [0x03, 0xE9]))
        shutdown(pair.client, Int32(SHUT_WR))
        _ = pair.run { _ in ended != nil }
        guard case .closed(let handshake)? = ended else { return XCTFail("ended: \(String(describing: ended))") }
        XCTAssertTrue(handshake.initiatedByUs)
        XCTAssertEqual(pair.server.exposition.clientsConnected, 0, "the server no longer counts the client")
    }

    func testKeepalivePingsGiveEveryClientItsDriver() throws {
        var configuration = ServerConfiguration()
        configuration.connection.pingInterval = 30
        let pair = try handedOver(configuration: configuration)
        defer { close(pair.client) }
        XCTAssertFalse(pair.connection.isParked)
        XCTAssertNotNil(pair.connection.activeDriver)
        pair.connection.activeDriver?.abandon()
    }
}
