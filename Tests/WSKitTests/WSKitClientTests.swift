import Foundation
import XCTest
import TestSupport
import WSKit

/// WSKit's client against independent peers: Python `websockets` (echo.py), a frame-level
/// scripted server (frames.py) and websocat's mirror. Every wait is bounded.
final class WSKitClientTests: XCTestCase {
    /// What frames.py records of a connection (the part these tests read).
    struct FramesRecord: Decodable {
        struct Close: Decodable { let code: Int?; let reason: String }
        let close: Close?
    }

    private var peers: [Peer] = []
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "wskit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        for peer in peers { peer.process.kill() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func python(_ script: String, _ arguments: [String] = [], record: Bool = false) throws -> Peer {
        let file = record ? directory + "/record-\(UUID().uuidString).json" : nil
        let peer = try Peer.launch(executable: Locations.python,
                                   arguments: ["\(Locations.peers)/\(script)", "--port", "0"] + (file.map { ["--record", $0] } ?? []) + arguments,
                                   environment: Locations.baseEnvironment, recordFile: file)
        peers.append(peer)
        return peer
    }

    /// Fails the test instead of hanging when `body` takes longer than `seconds`.
    private func bounded<T: Sendable>(_ seconds: Double = 20, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withTimeout(seconds, "the test", body)
    }

    func testTextAndBinaryEchoWithSubprotocol() async throws {
        let peer = try python("echo.py", ["--subprotocols", "v2.json"])
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/",
                                             options: .init(headers: ["X-Client": "tests"], subprotocols: ["v1", "v2.json"]))
        XCTAssertEqual(ws.subprotocol, "v2.json")
        XCTAssertEqual(ws.state, .open)
        let big = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try await bounded {
            try await ws.send(.text("héllo"))
            try await ws.send(.binary([0, 1, 2, 255]))
            try await ws.send(.text(""))
            try await ws.send(.binary(big))
            var iterator = ws.messages.makeAsyncIterator()
            let a = try await iterator.next()
            let b = try await iterator.next()
            let c = try await iterator.next()
            let d = try await iterator.next()
            XCTAssertEqual(a, .text("héllo"))
            XCTAssertEqual(b, .binary([0, 1, 2, 255]))
            XCTAssertEqual(c, .text(""))
            XCTAssertEqual(d, .binary(big))
            try await ws.close()
        }
        XCTAssertEqual(ws.state, .closed)
        XCTAssertEqual(ws.closeCode, 1000)
    }

    /// A burst of sends (the engine drains while the caller keeps adding, and comes back by
    /// itself once the driver has written), then a quiet moment, then a single send and a
    /// ping: each is delivered, so nothing is left waiting for a wake that never comes.
    func testASendAfterABurstAndAQuietMomentStillGoesOut() async throws {
        let peer = try python("echo.py")
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        try await bounded {
            let count = 5_000
            for i in 0..<count { try await ws.send(.text("burst \(i)")) }
            var iterator = ws.messages.makeAsyncIterator()
            for i in 0..<count {
                let echoed = try await iterator.next()
                XCTAssertEqual(echoed, .text("burst \(i)"))
                if echoed != .text("burst \(i)") { break }
            }
            for round in 0..<3 {
                try await Task.sleep(for: .milliseconds(50))
                try await ws.send(.text("after \(round)"))
                let echoed = try await iterator.next()
                XCTAssertEqual(echoed, .text("after \(round)"))
                _ = try await ws.ping()
            }
            try await ws.close()
        }
        XCTAssertEqual(ws.closeCode, 1000)
    }

    /// Received text is made into a String without a second UTF-8 check (the engine checked
    /// it): every byte arrives as sent, short and long, with 2-, 3- and 4-byte characters
    /// split across socket reads (and the inflater's output chunks), uncompressed and under
    /// permessage-deflate (Python `websockets` with its defaults compresses).
    func testTextOfEveryWidthArrivesByteForByte() async throws {
        let texts = ["é", "héllo", "€uro", "😀", String(repeating: #"{"name":"Zoë","v":"日本","e":"🎉"},"#, count: 40),
                     String(repeating: "aé€😀", count: 100_000), String(repeating: "x", count: 70_000) + "é"]
        for library in [false, true] {
            let peer = try python("echo.py", library ? ["--library-defaults"] : [])
            let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
            XCTAssertEqual(ws.deflate != nil, library)
            let received = try await bounded { () -> [String] in
                for text in texts { try await ws.send(.text(text)) }
                var iterator = ws.messages.makeAsyncIterator()
                var received: [String] = []
                for _ in texts {
                    guard case .text(let text)? = try await iterator.next() else { return received }
                    received.append(text)
                }
                try await ws.close()
                return received
            }
            XCTAssertEqual(received.count, texts.count)
            for (got, sent) in zip(received, texts) {
                XCTAssertEqual(Array(got.utf8), Array(sent.utf8), "deflate \(library): \(sent.prefix(20))")
                XCTAssertEqual(got.unicodeScalars.count, sent.unicodeScalars.count)
                XCTAssertEqual(got, sent)
            }
        }
    }

    /// Text that is not UTF-8 in any shape fails the connection with 1007 and none of it is
    /// delivered (what came before is): a bad byte in a later fragment, a character cut at
    /// the final fragment's end, and the same found only once inflated (permessage-deflate).
    /// WSKit makes Strings without checking again, so the engine's checks must all hold.
    func testTextThatIsNotUTF8FailsWith1007WhateverItsShape() async throws {
        let deflate = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n".utf8)
        // Raw deflate, the 00 00 FF FF tail removed (RFC 7692 §7.2.1): "fine é", "ok" + C3, FF.
        let fineCompressed: [UInt8] = [0x4A, 0xCB, 0xCC, 0x4B, 0x55, 0x38, 0xBC, 0x12, 0x00]
        let cases: [(String, [UInt8])] = [
            ("a bad byte in a later fragment",
             Wire.switching + Wire.text("fine é") + Wire.frame(0x1, Array("ok".utf8), fin: false) + Wire.frame(0x0, [0xFF])),
            ("a character cut at the end",
             Wire.switching + Wire.text("fine é") + Wire.frame(0x1, [0x68], fin: false) + Wire.frame(0x0, [0xC3, 0xA9], fin: false)
                + Wire.frame(0x0, [0xC3])),
            ("a character cut at the end, once inflated",
             deflate + Wire.frame(0x1, fineCompressed, rsv: 4) + Wire.frame(0x1, [0xCA, 0xCF, 0x3E, 0x0C, 0x00], rsv: 4)),
            ("a bad byte, once inflated", deflate + Wire.frame(0x1, fineCompressed, rsv: 4) + Wire.frame(0x1, [0xFA, 0x0F, 0x00], rsv: 4)),
        ]
        for (shape, bytes) in cases {
            let script = directory + "/script-\(UUID().uuidString)"
            try Data(bytes).write(to: URL(fileURLWithPath: script))
            let peer = try python("raw.py", ["--scenario", "script", "--script", script, "--then", "behave"], record: true)
            let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
            let (received, failure) = try await bounded { () -> ([Message], WebSocketError?) in
                var received: [Message] = []
                do {
                    for try await message in ws.messages { received.append(message) }
                    return (received, nil)
                } catch {
                    return (received, error as? WebSocketError)
                }
            }
            XCTAssertEqual(received, [.text("fine é")], shape)
            guard case .protocolError(let code, _)? = failure else { XCTFail("\(shape): \(String(describing: failure))"); continue }
            XCTAssertEqual(code, 1007, shape)
            XCTAssertEqual(try peer.record(1, as: FramesRecord.self).close?.code, 1007, shape)
        }
    }

    func testFragmentedMessagesArriveWhole() async throws {
        let peer = try python("frames.py", ["--send-text", "fragmented text message", "--send-binary-hex", "00010203040506",
                                            "--fragment", "3", "--close-code", "1000"], record: true)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        let received = try await bounded { () -> [Message] in
            var all: [Message] = []
            for try await message in ws.messages { all.append(message) }
            return all
        }
        XCTAssertEqual(received, [.text("fragmented text message"), .binary([0, 1, 2, 3, 4, 5, 6])])
        XCTAssertEqual(ws.closeCode, 1000)
    }

    func testPingReturnsRoundTrip() async throws {
        let peer = try python("echo.py")
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        let rtt = try await bounded { try await ws.ping() }
        XCTAssertGreaterThan(rtt, .zero)
        XCTAssertLessThan(rtt, .seconds(10))
        try await ws.close()
    }

    func testPeerClosesWithAnyCode() async throws {
        let peer = try python("frames.py", ["--send-text", "last", "--close-code", "4321", "--close-reason", "bye now"], record: true)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        let received = try await bounded { () -> [Message] in
            var all: [Message] = []
            for try await message in ws.messages { all.append(message) }
            return all
        }
        XCTAssertEqual(received, [.text("last")])
        XCTAssertEqual(ws.closeCode, 4321)
        XCTAssertEqual(ws.closeReason, "bye now")
        XCTAssertEqual(ws.state, .closed)
        do {
            try await ws.send(.text("too late"))
            XCTFail("send after the close succeeded")
        } catch .closed(let code, _) {
            XCTAssertEqual(code, 4321)
        }
    }

    func testWeCloseWithCodeAndReason() async throws {
        let peer = try python("frames.py", [], record: true)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        try await bounded { try await ws.close(code: 4000, reason: "done") }
        let record = try peer.record(1, as: FramesRecord.self)
        XCTAssertEqual(record.close?.code, 4000)
        XCTAssertEqual(record.close?.reason, "done")
        do {
            try await ws.close(code: 1005)
            XCTFail("1005 may not be sent")
        } catch .invalidArgument {}
    }

    func testInvalidUTF8IsAProtocolErrorWith1007() async throws {
        let peer = try python("frames.py", ["--send-text-hex", "c328"], record: true)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        do {
            try await bounded { for try await _ in ws.messages {} }
            XCTFail("no error")
        } catch let error as WebSocketError {
            guard case .protocolError(let code, let text) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(code, 1007)
            XCTAssertTrue(text.contains("UTF-8"), text)
        }
        XCTAssertEqual(try peer.record(1, as: FramesRecord.self).close?.code, 1007)
    }

    func testCancellingTheReceivingTaskClosesWith1001() async throws {
        let peer = try python("frames.py", [], record: true)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        let reader = Task { () -> WebSocketError? in
            do {
                for try await _ in ws.messages {}
                return nil
            } catch {
                return error as? WebSocketError
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        reader.cancel()
        let error = try await bounded { await reader.value }
        XCTAssertEqual(error, WebSocketError.cancelled)
        XCTAssertEqual(try peer.record(1, as: FramesRecord.self).close?.code, 1001)
    }

    /// A message split between two socket reads is assembled in one allocation of its size:
    /// an array grown by doubling copied its first part twice and held 120 KB for 64 KiB.
    func testAMessageSplitBetweenReadsIsSizedOnce() async throws {
        let peer = try python("raw.py", ["--scenario", "split-binary"], record: true)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        let message = try await bounded { () -> Message? in
            var iterator = ws.messages.makeAsyncIterator()
            return try await iterator.next()
        }
        guard case .binary(let bytes)? = message else { return XCTFail("\(String(describing: message))") }
        XCTAssertEqual(bytes, (0..<65536).map { UInt8(truncatingIfNeeded: $0) })
        XCTAssertLessThan(bytes.capacity, 65536 + 4096)
        try await ws.close()
    }

    func testCancellingABlockedSendClosesWith1001() async throws {
        // The peer never reads: the socket queue fills and send waits.
        let peer = try python("raw.py", ["--scenario", "stream-no-read"], record: true)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        let chunk = [UInt8](repeating: 7, count: 1 << 20)
        let sender = Task { () -> WebSocketError? in
            do {
                while true { try await ws.send(.binary(chunk)) }
            } catch {
                return error as? WebSocketError
            }
        }
        try await Task.sleep(for: .milliseconds(500))
        sender.cancel()
        let error = try await bounded { await sender.value }
        XCTAssertEqual(error, WebSocketError.cancelled)
        XCTAssertNotEqual(ws.state, .open)
    }

    /// `send` suspends once 768 KiB wait for the socket (the documented limit): against a
    /// peer that does not read, what the returned sends queued beyond the kernel's bytes is
    /// the limit, give or take two messages; once the peer reads, every send returns. (Not
    /// before the limit either: at the driver's own 384 KiB a 64 KiB upload waited on the
    /// sender after every message the socket took.)
    func testSendSuspendsOnceTheLimitWaitsForTheSocket() async throws {
        let go = directory + "/go-\(UUID().uuidString)"
        let peer = try Peer.slowReader(go: go)
        defer { peer.process.kill() }
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        let size = 16384, frame = 16384 + 8  // a client's frame: 2 + 2 length + 4 mask
        let limit = 768 * 1024
        // More than the kernel and the limit hold together.
        let sendBufferMax = largestSendBuffer()
        let count = (sendBufferMax + limit) / size + 64
        let returned = Counter()
        let sender = sendInALoop(ws, .binary([UInt8](repeating: 0x61, count: size)), count: count, counting: returned)
        // The count and the kernel's bytes both still for 0.5 s; once more while under the
        // limit (a caller's task not run for that long on a loaded machine looks the same).
        var stalled = 0, held = 0, waiting = 0
        for _ in 0..<10 {
            let settled = try await settledValue { [returned.count, kernelHeldBytes(port: peer.port)] }
            stalled = settled[0]
            held = settled[1]
            // The suspended send's message is queued too.
            waiting = (stalled + 1) * frame - held
            if waiting >= limit - 2 * frame { break }
        }
        XCTAssertGreaterThan(held, 0, "the connection's queues in /proc/net/tcp")
        XCTAssertLessThan(stalled, count, "a send suspends while the peer does not read")
        XCTAssertGreaterThanOrEqual(waiting, limit - 2 * frame, "\(stalled) sends returned, the kernel holds \(held)")
        XCTAssertLessThanOrEqual(waiting, limit + 2 * frame, "\(stalled) sends returned, the kernel holds \(held)")
        try Data().write(to: URL(fileURLWithPath: go))
        let failure = try await bounded { await sender.value }
        XCTAssertNil(failure)
        XCTAssertEqual(returned.count, count)
    }

    /// Empty messages count against the send limit too (each entry weighs its place in
    /// the queue): against a peer that does not read, a caller sending them in a loop is
    /// suspended, not left to grow the queue until memory runs out.
    func testEmptyMessagesAreSuspendedToo() async throws {
        let go = directory + "/go-\(UUID().uuidString)"
        let peer = try Peer.slowReader(go: go)
        defer { peer.process.kill() }
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        // Far more 6-byte frames than the kernel holds (its largest send buffer) and the
        // limit's share of them.
        let sendBufferMax = largestSendBuffer()
        let count = 3 * sendBufferMax / 6
        let returned = Counter()
        let sender = sendInALoop(ws, .binary([]), count: count, counting: returned)
        let stalled = try await settledValue { returned.count }
        XCTAssertLessThan(stalled, count, "a send of an empty message suspends while the peer does not read")
        peer.process.kill()
        let failure = try await bounded { await sender.value }
        XCTAssertNotNil(failure, "the peer went away with sends still waiting")
    }

    /// Sends `message` `count` times from a task of its own, adding each returned send to
    /// `returned`; the task's value is the error that stopped it, if any.
    private func sendInALoop(_ ws: WebSocket, _ message: Message, count: Int, counting returned: Counter) -> Task<WebSocketError?, Never> {
        Task {
            do {
                for i in 0..<count {
                    try await ws.send(message)
                    returned.add(i)
                }
                return nil
            } catch {
                return error as? WebSocketError
            }
        }
    }

    func testConnectFailuresAreCases() async throws {
        // Nothing listens on a port that was free a moment ago.
        let port = try LoopbackSocket(listening: false).port
        do {
            _ = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
            XCTFail("connected")
        } catch .cannotConnect(let text) {
            XCTAssertTrue(text.contains("refused"), text)
        }
        do {
            _ = try await WebSocket.connect(to: "http://127.0.0.1/")
        } catch .invalidURL {} catch { XCTFail("\(error)") }
        let peer = try python("echo.py", ["--subprotocols", "only"])
        do {
            _ = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/", options: .init(headers: ["Bad\r\nName": "x"]))
            XCTFail("header accepted")
        } catch .invalidArgument {}
    }

    func testHandshakeRejectedCarriesTheStatus() async throws {
        let peer = try python("raw.py", ["--scenario", "reject-401"], record: true)
        do {
            _ = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
            XCTFail("connected")
        } catch .handshakeRejected(let status, let text) {
            XCTAssertEqual(status, 401)
            XCTAssertTrue(text.contains("401 Unauthorized") && text.contains("token expired"), text)
        }
    }

    func testWebsocatMirror() async throws {
        let port = try LoopbackSocket(listening: false).port
        let process = try ChildProcess(executable: Locations.websocat, arguments: ["-t", "ws-l:127.0.0.1:\(port)", "mirror:"],
                                       environment: Locations.baseEnvironment, stdin: .null)
        defer { process.kill() }
        var ws: WebSocket?
        for _ in 0..<100 where ws == nil {
            ws = try? await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
            if ws == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard let ws else { return XCTFail("websocat did not start") }
        try await bounded {
            try await ws.send(.text("through websocat"))
            var iterator = ws.messages.makeAsyncIterator()
            let echoed = try await iterator.next()
            XCTAssertEqual(echoed, .text("through websocat"))
            try await ws.close()
        }
    }

    func testThousandConcurrentConnectionsFromOneProcess() async throws {
        let peer = try python("echo.py")
        let url = "ws://127.0.0.1:\(peer.port)/"
        let count = 1000
        let echoed = try await bounded(120) { () -> Int in
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<count {
                    group.addTask {
                        let ws = try await WebSocket.connect(to: url, options: .init())
                        try await ws.send(.text("client \(index)"))
                        var iterator = ws.messages.makeAsyncIterator()
                        let reply = try await iterator.next()
                        try await ws.close()
                        return reply == .text("client \(index)")
                    }
                }
                var good = 0
                for try await ok in group where ok { good += 1 }
                return good
            }
        }
        XCTAssertEqual(echoed, count)
    }

    // MARK: - close() against a slow server (issue 26)

    func testCloseWaitsForASlowServerThatIsStillReplying() async throws {
        // Python websockets sleeping 50 ms every 500 messages: ~2 s to echo the tail of
        // 20,000, twice the close timeout, while it echoes steadily.
        let peer = try python("echo.py", ["--pause-every", "500", "--pause", "0.05"])
        var options = WebSocketOptions()
        options.closeTimeout = .seconds(1)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/", options: options)
        let count = 20_000
        let received = try await bounded(60) { () -> Int in
            let reader = Task { () -> Int in
                var n = 0
                for try await _ in ws.messages { n += 1 }
                return n
            }
            for i in 0..<count { try await ws.send(.text("m\(i)")) }
            try await ws.close()
            return try await reader.value
        }
        XCTAssertEqual(received, count)
        XCTAssertEqual(ws.deliveryConfirmed, true)
        XCTAssertEqual(ws.closeCode, 1000)
    }

    func testCloseGivesUpOnAServerThatStreamsAndNeverAnswersThePing() async throws {
        // Its stream counts as progress for 10 close timeouts, then the Close goes anyway.
        let peer = try python("raw.py", ["--scenario", "stream-no-pong"], record: true)
        var options = WebSocketOptions()
        options.closeTimeout = .milliseconds(500)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/", options: options)
        let started = monotonicSeconds()
        try await bounded(20) {
            let reader = Task { for try await _ in ws.messages {} }
            try await ws.send(.text("x"))
            try await ws.close()
            _ = await reader.result
        }
        let elapsed = monotonicSeconds() - started
        XCTAssertEqual(ws.deliveryConfirmed, false)
        XCTAssertGreaterThan(elapsed, 4.5, "the stream did not count as progress")
        XCTAssertLessThan(elapsed, 7.5)
        XCTAssertEqual(ws.closeCode, 1000)
    }
}
