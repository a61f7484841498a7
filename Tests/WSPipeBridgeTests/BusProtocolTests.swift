// The bus's pure parts (WSPipeBus): the RESP parser fed at every split point, the command
// encoder, the --bus URL and the envelope that keeps text and binary apart.
import XCTest
import WebSocketCore
@testable import WSPipeBus

final class BusProtocolTests: XCTestCase {
    private func parse(_ pieces: [[UInt8]], maximumBulk: Int = 1 << 20) throws -> [RESPValue] {
        var parser = RESPParser(maximumBulk: maximumBulk)
        var values: [RESPValue] = []
        for piece in pieces { try piece.withUnsafeBytes { try parser.consume($0, into: &values) } }
        return values
    }

    /// Every way of cutting `bytes` in two, and one byte at a time, gives `expected`.
    private func assertEverySplit(_ text: String, _ expected: [RESPValue], maximumBulk: Int = 1 << 20,
                                  file: StaticString = #filePath, line: UInt = #line) throws {
        let bytes = Array(text.utf8)
        for cut in 0...bytes.count {
            XCTAssertEqual(try parse([Array(bytes[..<cut]), Array(bytes[cut...])], maximumBulk: maximumBulk), expected,
                           "cut at \(cut)", file: file, line: line)
        }
        XCTAssertEqual(try parse(bytes.map { [$0] }, maximumBulk: maximumBulk), expected, "byte by byte", file: file, line: line)
    }

    func testAPubSubPushAndRepliesAtEverySplitPoint() throws {
        let stream = "+OK\r\n*3\r\n$9\r\nsubscribe\r\n$6\r\nticker\r\n:1\r\n*3\r\n$7\r\nmessage\r\n$6\r\nticker\r\n$7\r\n{\"p\":1}\r\n"
            + "-WRONGPASS invalid username-password pair\r\n$-1\r\n*0\r\n$0\r\n\r\n"
        try assertEverySplit(stream, [
            .simple(Array("OK".utf8)),
            .array([.bulk(Array("subscribe".utf8)), .bulk(Array("ticker".utf8)), .integer(1)]),
            .array([.bulk(Array("message".utf8)), .bulk(Array("ticker".utf8)), .bulk(Array("{\"p\":1}".utf8))]),
            .error(Array("WRONGPASS invalid username-password pair".utf8)),
            .null, .array([]), .bulk([]),
        ])
    }

    func testNestedArraysAndNegativeIntegers() throws {
        try assertEverySplit("*2\r\n*1\r\n:-42\r\n*2\r\n+a\r\n$1\r\nb\r\n", [
            .array([.array([.integer(-42)]), .array([.simple([0x61]), .bulk([0x62])])]),
        ])
    }

    func testABulkOverTheLimitIsSkippedAndTheNextValueStillComes() throws {
        let payload = String(repeating: "x", count: 40)
        try assertEverySplit("*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$40\r\n\(payload)\r\n+PONG\r\n", [
            .array([.bulk(Array("message".utf8)), .bulk([0x63]), .oversized(40)]),
            .simple(Array("PONG".utf8)),
        ], maximumBulk: 39)
        // At the limit it is kept.
        XCTAssertEqual(try parse([Array("$40\r\n\(payload)\r\n".utf8)], maximumBulk: 40), [.bulk(Array(payload.utf8))])
    }

    func testBinaryBulkBytesAreKeptExactly() throws {
        let binary: [UInt8] = [0x02, 0x00, 0x0D, 0x0A, 0xFF, 0x24]
        let bytes = Array("$6\r\n".utf8) + binary + [0x0D, 0x0A]
        for cut in 0...bytes.count {
            XCTAssertEqual(try parse([Array(bytes[..<cut]), Array(bytes[cut...])]), [.bulk(binary)])
        }
    }

    func testWhatIsNotRESPIsAnError() {
        XCTAssertThrowsError(try parse([Array("hello\r\n".utf8)])) { XCTAssertEqual($0 as? RESPError, .unknownType(0x68)) }
        XCTAssertThrowsError(try parse([Array(":12a\r\n".utf8)])) { XCTAssertEqual($0 as? RESPError, .badNumber) }
        XCTAssertThrowsError(try parse([Array(":99999999999999999999\r\n".utf8)])) { XCTAssertEqual($0 as? RESPError, .badNumber) }
        XCTAssertThrowsError(try parse([Array("$-2\r\n".utf8)])) { XCTAssertEqual($0 as? RESPError, .badNumber) }
        XCTAssertThrowsError(try parse([Array("$3\r\nabcXY".utf8)])) { XCTAssertEqual($0 as? RESPError, .missingTerminator) }
        XCTAssertThrowsError(try parse([Array("+OK\n".utf8)])) { XCTAssertEqual($0 as? RESPError, .missingTerminator) }
        XCTAssertThrowsError(try parse([Array(String(repeating: "*1\r\n", count: 9).utf8)])) { XCTAssertEqual($0 as? RESPError, .tooDeep) }
        XCTAssertThrowsError(try parse([[UInt8(ascii: "+")] + [UInt8](repeating: 0x61, count: RESPParser.maximumLine + 1)])) {
            XCTAssertEqual($0 as? RESPError, .lineTooLong)
        }
    }

    func testCommandsAreArraysOfBulkStrings() throws {
        XCTAssertEqual(String(decoding: RESPCommand.encode("AUTH", "bus user", "p@ss"), as: UTF8.self),
                       "*3\r\n$4\r\nAUTH\r\n$8\r\nbus user\r\n$4\r\np@ss\r\n")
        // What we encode, our parser reads back (binary included).
        let publish = RESPCommand.encode([Array("PUBLISH".utf8), Array("t".utf8), [0x02, 0x0D, 0x0A, 0x00]])
        XCTAssertEqual(try parse([publish]), [.array([.bulk(Array("PUBLISH".utf8)), .bulk([0x74]), .bulk([0x02, 0x0D, 0x0A, 0x00])])])
    }

    func testBusURLs() throws {
        let plain = try BusAddress(parsing: "redis://127.0.0.1/ticker")
        XCTAssertEqual(plain.host, "127.0.0.1")
        XCTAssertEqual(plain.port, 6379)
        XCTAssertEqual(plain.channel, "ticker")
        XCTAssertFalse(plain.tls)
        XCTAssertNil(plain.password)
        let full = try BusAddress(parsing: "rediss://app:s%40cret:x@[::1]:6380/chat.in")
        XCTAssertTrue(full.tls)
        XCTAssertEqual(full.host, "::1")
        XCTAssertEqual(full.port, 6380)
        XCTAssertEqual(full.user, "app")
        XCTAssertEqual(full.password, "s@cret:x")
        XCTAssertEqual(full.channel, "chat.in")
        XCTAssertEqual(full.description, "rediss://app:***@[::1]:6380/chat.in", "the password is never shown")
        let bare = try BusAddress(parsing: "redis://[::1]/t")
        XCTAssertEqual(bare.host, "::1")
        XCTAssertEqual(bare.port, 6379, "an IPv6 literal without a port: the default")
        XCTAssertEqual(try BusAddress(parsing: "nats://[::1]:80/t").port, 80)
        for bad in ["redis://[::1/t", "redis://[::1]6380/t", "redis://[]:6380/t"] {
            XCTAssertThrowsError(try BusAddress(parsing: bad), bad) { XCTAssertEqual($0 as? BusAddress.Problem, .noHost, bad) }
        }
        let passwordOnly = try BusAddress(parsing: "redis://:hunter2@bus/t")
        XCTAssertNil(passwordOnly.user)
        XCTAssertEqual(passwordOnly.password, "hunter2")
        XCTAssertEqual(passwordOnly.description, "redis://***@bus:6379/t")
        func problem(_ text: String) -> BusAddress.Problem? {
            do { _ = try BusAddress(parsing: text); return nil } catch { return error }
        }
        let nats = try BusAddress(parsing: "nats://app:pw@127.0.0.1/chat.in")
        XCTAssertEqual(nats.kind, .nats)
        XCTAssertEqual(nats.port, 4222)
        XCTAssertEqual(nats.description, "nats://app:***@127.0.0.1:4222/chat.in")
        XCTAssertEqual(problem("nats://h/a.*"), .badChannel("a.*"), "no wildcards: we publish on the subject too")
        XCTAssertEqual(problem("nats://h/a..b"), .badChannel("a..b"))
        XCTAssertEqual(problem("nats://h/>"), .badChannel(">"))
        XCTAssertEqual(try BusAddress(parsing: "tls://tok@h/t").description, "tls://***@h:4222/t")
        // The user as URL text again, so the description parses back to the same user (fuzz target bus).
        let escapedUser = try BusAddress(parsing: "redis://a%25s%40x%3Ay%C3%A9:pw@h/t")
        XCTAssertEqual(escapedUser.user, "a%s@x:yé")
        XCTAssertEqual(escapedUser.description, "redis://a%25s%40x%3Ay%C3%A9:***@h:6379/t")
        XCTAssertEqual(try BusAddress(parsing: escapedUser.description).user, "a%s@x:yé")
        XCTAssertEqual(problem("http://h/t"), .scheme("http"))
        XCTAssertEqual(problem("127.0.0.1:6379"), .scheme("127.0.0.1:6379"))
        XCTAssertEqual(problem("redis://h"), .noChannel)
        XCTAssertEqual(problem("redis://h/"), .noChannel)
        XCTAssertEqual(problem("redis:///t"), .noHost)
        XCTAssertEqual(problem("redis://h:0/t"), .badPort("0"))
        XCTAssertEqual(problem("redis://h:x/t"), .badPort("x"))
        XCTAssertEqual(problem("redis://h/a b"), .badChannel("a b"))
        XCTAssertEqual(problem("redis://a[::]:1/t"), .badHost("a[::]"), "found by fuzz/run resp")
        XCTAssertEqual(problem("redis://[::g]/t"), .badHost("::g"))
        XCTAssertEqual(problem("redis://:%4@h/t"), .badEscape)
    }

    func testTheEnvelopeKeepsTextAndBinaryApartAndReadsOtherPublishers() {
        func roundTrip(_ kind: MessageKind, _ payload: [UInt8]) -> (MessageKind, [UInt8])? {
            let message = payload.withUnsafeBytes { BusEnvelope.encode(kind, $0) }
            return BusEnvelope.decode(message).map { ($0.kind, Array(message[$0.payloadStart...])) }
        }
        for payload: [UInt8] in [[], Array("héllo".utf8), [0x01, 0x61], [0x02]] {
            XCTAssertEqual(roundTrip(.text, payload)?.0, .text)
            XCTAssertEqual(roundTrip(.text, payload)?.1, payload)
        }
        for payload: [UInt8] in [[], Array("valid text".utf8), [0xFF, 0x00], [0x01]] {
            XCTAssertEqual(roundTrip(.binary, payload)?.0, .binary, "a binary message stays binary, even when it is UTF-8")
            XCTAssertEqual(roundTrip(.binary, payload)?.1, payload)
        }
        // redis-cli publish ticker '{"p":1}': untagged UTF-8 is text, the rest binary.
        XCTAssertEqual(BusEnvelope.decode(Array("{\"p\":1}".utf8))?.kind, .text)
        XCTAssertEqual(BusEnvelope.decode(Array("{\"p\":1}".utf8))?.payloadStart, 0)
        XCTAssertEqual(BusEnvelope.decode([0xC3, 0x28])?.kind, .binary)
        XCTAssertEqual(BusEnvelope.decode([])?.kind, .text)
        XCTAssertNil(BusEnvelope.decode([0x01, 0xC3, 0x28]), "tagged text that is not UTF-8 is dropped")
    }

    private func parseNATS(_ pieces: [[UInt8]], maximumPayload: Int = 1 << 20) throws -> [NATSOperation] {
        var parser = NATSParser(maximumPayload: maximumPayload)
        var operations: [NATSOperation] = []
        for piece in pieces { try piece.withUnsafeBytes { try parser.consume($0, into: &operations) } }
        return operations
    }

    func testNATSOperationsAtEverySplitPoint() throws {
        let stream = Array("INFO {\"server_id\":\"N1\",\"max_payload\":1048576}\r\n+OK\r\nPING\r\npong\r\n".utf8)
            + Array("MSG ticker 1 8\r\n\u{1}{\"p\":1}\r\nMSG ticker 1 _INBOX.x 3\r\n".utf8) + [0x02, 0x0D, 0x0A] + [0x0D, 0x0A]
            + Array("MSG t 1 0\r\n\r\nMSG big 1 12\r\nxxxxxxxxxxxx\r\n-ERR 'Authorization Violation'\r\n".utf8)
        let expected: [NATSOperation] = [
            .info(Array("{\"server_id\":\"N1\",\"max_payload\":1048576}".utf8)), .ok, .ping, .pong,
            .message(subject: Array("ticker".utf8), sid: [0x31], payload: Array("\u{1}{\"p\":1}".utf8)),
            .message(subject: Array("ticker".utf8), sid: [0x31], payload: [0x02, 0x0D, 0x0A]),
            .message(subject: [0x74], sid: [0x31], payload: []),
            .oversized(12),
            .error(Array("Authorization Violation".utf8)),
        ]
        for cut in 0...stream.count {
            XCTAssertEqual(try parseNATS([Array(stream[..<cut]), Array(stream[cut...])], maximumPayload: 11), expected, "cut at \(cut)")
        }
        XCTAssertEqual(try parseNATS(stream.map { [$0] }, maximumPayload: 11), expected, "byte by byte")
    }

    func testWhatIsNotNATSIsAnError() {
        XCTAssertThrowsError(try parseNATS([Array("HMSG t 1 5 10\r\n".utf8)])) { XCTAssertEqual($0 as? NATSError, .unknownOperation) }
        XCTAssertThrowsError(try parseNATS([Array("MSG t 1\r\n".utf8)])) { XCTAssertEqual($0 as? NATSError, .badArguments) }
        XCTAssertThrowsError(try parseNATS([Array("MSG t 1 -3\r\n".utf8)])) { XCTAssertEqual($0 as? NATSError, .badArguments) }
        XCTAssertThrowsError(try parseNATS([Array("MSG t 1 3\r\nabcd".utf8)])) { XCTAssertEqual($0 as? NATSError, .missingTerminator) }
        XCTAssertThrowsError(try parseNATS([Array("PING\n".utf8)])) { XCTAssertEqual($0 as? NATSError, .missingTerminator) }
        XCTAssertThrowsError(try parseNATS([Array("\r\n".utf8)])) { XCTAssertEqual($0 as? NATSError, .unknownOperation) }
    }

    func testNATSCommands() {
        XCTAssertEqual(String(decoding: NATSCommand.connect(user: "app", password: "p\"w\u{1}", tls: false, name: "wspipe", version: "0"), as: UTF8.self),
                       "CONNECT {\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\"name\":\"wspipe\",\"lang\":\"swift\","
                       + "\"version\":\"0\",\"protocol\":1,\"echo\":true,\"user\":\"app\",\"pass\":\"p\\\"w\\u0001\"}\r\n")
        XCTAssertTrue(String(decoding: NATSCommand.connect(user: nil, password: "tok", tls: false, name: "w", version: "0"), as: UTF8.self)
            .contains(",\"auth_token\":\"tok\"}"), "the password alone is a token")
        XCTAssertEqual(NATSCommand.publish(Array("t".utf8), [0x02, 0x0D, 0x0A]), Array("PUB t 3\r\n".utf8) + [0x02, 0x0D, 0x0A, 0x0D, 0x0A])
        XCTAssertEqual(String(decoding: NATSCommand.subscribe(Array("chat.in".utf8), sid: 1), as: UTF8.self), "SUB chat.in 1\r\n")
    }
}
