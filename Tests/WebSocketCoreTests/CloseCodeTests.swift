// Close status codes (RFC 6455 §7.4) and Close frame payloads (§5.5.1).
import XCTest
@testable import WebSocketCore

final class CloseCodeTests: XCTestCase {
    /// §7.4.1/§7.4.2 and the IANA registry: 0-999 unused, 1004-1006 and 1015 reserved,
    /// 1016-2999 reserved for the protocol, 3000-4999 applications, 5000+ undefined.
    func expectedSendable(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    func testIsSendableTable() {
        let table: [(UInt16, Bool)] = [
            (0, false), (999, false),
            (1000, true), (1001, true), (1002, true), (1003, true),
            (1004, false), (1005, false), (1006, false),
            (1007, true), (1008, true), (1009, true), (1010, true), (1011, true), (1012, true), (1013, true), (1014, true),
            (1015, false), (1016, false), (2000, false), (2999, false),
            (3000, true), (3999, true), (4000, true), (4999, true),
            (5000, false), (65535, false),
        ]
        for (code, sendable) in table {
            XCTAssertEqual(CloseCode(code).isSendable, sendable, "\(code)")
        }
    }

    func testIsSendableForEveryCode() {
        for code in UInt16.min...UInt16.max where CloseCode(code).isSendable != expectedSendable(code) {
            XCTFail("isSendable(\(code)) is \(CloseCode(code).isSendable)")
        }
    }

    func testNamedCodesHaveTheirNumbers() {
        XCTAssertEqual(CloseCode.normalClosure.rawValue, 1000)
        XCTAssertEqual(CloseCode.goingAway.rawValue, 1001)
        XCTAssertEqual(CloseCode.protocolError.rawValue, 1002)
        XCTAssertEqual(CloseCode.unsupportedData.rawValue, 1003)
        XCTAssertEqual(CloseCode.noStatusReceived.rawValue, 1005)
        XCTAssertEqual(CloseCode.abnormalClosure.rawValue, 1006)
        XCTAssertEqual(CloseCode.invalidPayloadData.rawValue, 1007)
        XCTAssertEqual(CloseCode.policyViolation.rawValue, 1008)
        XCTAssertEqual(CloseCode.messageTooBig.rawValue, 1009)
        XCTAssertEqual(CloseCode.mandatoryExtension.rawValue, 1010)
        XCTAssertEqual(CloseCode.internalError.rawValue, 1011)
        XCTAssertEqual(CloseCode(rawValue: 4321), CloseCode(4321))
    }

    func testDescriptionHasNumberAndName() {
        XCTAssertEqual(CloseCode.normalClosure.description, "1000 (normal closure)")
        XCTAssertEqual(CloseCode(4000).description, "4000 (private application code)")
        XCTAssertEqual(CloseCode(3000).description, "3000 (registered application code)")
        XCTAssertEqual(CloseCode(2000).description, "2000 (unassigned)")
    }

    func testReceiveErrorsMapToTheirCloseCodes() {
        XCTAssertEqual(ReceiveError.protocolError("x").closeCode, CloseCode(1002))
        XCTAssertEqual(ReceiveError.invalidUTF8("x").closeCode, CloseCode(1007))
        XCTAssertEqual(ReceiveError.messageTooBig(size: 2, limit: 1).closeCode, CloseCode(1009))
        XCTAssertEqual(ReceiveError.protocolError("why").description, "why")
    }

    // MARK: Parsing received payloads

    func parse(_ bytes: [UInt8]) -> Result<ClosePayload, ReceiveError> {
        do throws(ReceiveError) {
            return .success(try ClosePayload(parsing: bytes))
        } catch {
            return .failure(error)
        }
    }

    func error(_ result: Result<ClosePayload, ReceiveError>) -> ReceiveError? {
        if case .failure(let error) = result { return error }
        return nil
    }

    func testEmptyPayloadHasNoCode() {
        XCTAssertEqual(try parse([]).get(), ClosePayload(code: nil, reason: []))
    }

    func testOneBytePayloadIsProtocolError() {
        assertProtocolError(error(parse([0x03])))
    }

    func testCodeAloneParses() {
        XCTAssertEqual(try parse([0x03, 0xE8]).get(), ClosePayload(code: .normalClosure))
    }

    func testCodeAndUTF8ReasonParse() {
        let payload = try? parse([0x0F, 0xA0] + utf8("bye ✓")).get()
        XCTAssertEqual(payload?.code, CloseCode(4000))
        XCTAssertEqual(payload?.reason, utf8("bye ✓"))
        XCTAssertEqual(payload?.reasonText, "bye ✓")
    }

    func testLongestReasonParses() {
        let reason = [UInt8](repeating: 0x61, count: 123)
        XCTAssertEqual(try parse([0x03, 0xE9] + reason).get(), ClosePayload(code: .goingAway, reason: reason))
    }

    func testReservedCodesAreProtocolErrors() {
        for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
            assertProtocolError(error(parse([UInt8(code >> 8), UInt8(code & 0xFF)])), file: #filePath, line: #line)
        }
    }

    func testEverySendableCodeParses() {
        for code in UInt16.min...UInt16.max where expectedSendable(code) {
            guard case .success(let payload) = parse([UInt8(code >> 8), UInt8(code & 0xFF)]) else {
                return XCTFail("code \(code) refused")
            }
            XCTAssertEqual(payload.code, CloseCode(code))
        }
    }

    func testInvalidUTF8ReasonIsInvalidUTF8WithCode1007() {
        let failure = error(parse([0x03, 0xE8, 0x61, 0xFF]))
        assertInvalidUTF8(failure)
        XCTAssertEqual(failure?.closeCode.rawValue, 1007)
    }

    func testReasonEndingInsideACodePointIsInvalidUTF8() {
        assertInvalidUTF8(error(parse([0x03, 0xE8, 0xE2, 0x82])))
    }

    func testSurrogateInReasonIsInvalidUTF8() {
        assertInvalidUTF8(error(parse([0x03, 0xE8, 0xED, 0xA0, 0x80])))
    }

    // MARK: Building payloads

    func testBuiltPayloadBytesAreCodeInNetworkOrderThenReason() throws {
        XCTAssertEqual(try ClosePayload(code: .normalClosure, reason: "bye").bytes, [0x03, 0xE8, 0x62, 0x79, 0x65])
        XCTAssertEqual(try ClosePayload(code: CloseCode(4999), reason: "").bytes, [0x13, 0x87])
        XCTAssertEqual(ClosePayload(code: nil).bytes, [])
    }

    func testReasonOf123BytesIsAccepted() throws {
        let payload = try ClosePayload(code: .normalClosure, reason: String(repeating: "a", count: 123))
        XCTAssertEqual(payload.bytes.count, 125)
    }

    func testReasonOver123BytesThrows() {
        XCTAssertThrowsError(try ClosePayload(code: .normalClosure, reason: String(repeating: "a", count: 124))) { error in
            XCTAssertEqual(error as? CloseError, .reasonTooLong(124))
        }
    }

    func testReasonOver123BytesCountsUTF8BytesNotCharacters() {
        // 62 × "é" is 62 characters but 124 bytes.
        XCTAssertThrowsError(try ClosePayload(code: .normalClosure, reason: String(repeating: "é", count: 62))) { error in
            XCTAssertEqual(error as? CloseError, .reasonTooLong(124))
        }
    }

    func testUnsendableCodeCannotBeBuilt() {
        for code: UInt16 in [999, 1005, 1006, 1015, 5000] {
            XCTAssertThrowsError(try ClosePayload(code: CloseCode(code), reason: "x")) { error in
                XCTAssertEqual(error as? CloseError, .codeNotSendable(CloseCode(code)))
            }
        }
    }

    func testBuiltPayloadParsesBack() throws {
        let built = try ClosePayload(code: CloseCode(3001), reason: "naïve ✓")
        XCTAssertEqual(try parse(built.bytes).get(), built)
    }
}
