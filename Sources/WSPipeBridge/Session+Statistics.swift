import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

extension Session {
    // MARK: - -v and --stats at the end

    /// -v at the end: the messages each way, how many of them were compressed, and the
    /// wire bytes against the payload bytes of those (short ones go uncompressed).
    func compressionSummary(_ driver: ConnectionDriver) -> String {
        func side(_ total: UInt64, _ count: CompressionCount) -> String {
            let messages = "\(total) message\(total == 1 ? "" : "s")"
            guard count.messages > 0 else { return "\(messages) (none compressed)" }
            guard count.wire > 0 else { return "\(messages) (\(count.messages) compressed)" }
            let times = (Double(count.payload) / Double(count.wire) * 100).rounded() / 100
            return "\(messages) (\(count.messages) compressed: \(ByteCount.text(count.wire)) on the wire "
                + "for \(ByteCount.text(count.payload)), \(times)x)"
        }
        return "permessage-deflate: received \(side(stdout.assembler.messages, driver.compressionIn)); "
            + "sent \(side(driver.messagesSent, driver.compressionOut))"
    }

    /// The --stats line: one JSON object, with the runner's `members` (each followed by a
    /// comma) before the compression and the status.
    func statistics(_ status: ExitStatus, adding members: String) -> String {
        var line: [UInt8] = []
        func closeObject(_ payload: ClosePayload?) -> String {
            guard let payload else { return "null" }
            var reason: [UInt8] = []
            payload.reason.withUnsafeBytes { JSONWriter.appendString($0, to: &reason) }
            let code = payload.code.map { String($0.rawValue) } ?? "null"
            return "{\"code\":\(code),\"reason\":\(String(decoding: reason, as: UTF8.self))}"
        }
        let duration = (Instant.now().seconds(since: started) * 1000).rounded() / 1000
        let driver = self.driver ?? endedDriver
        let rtt = driver?.lastRoundTrip.map { String((($0 * 1e6).rounded()) / 1000) } ?? "null"
        line += Array(("{\"sent\":{\"messages\":\(framer.messages + sent.messages),\"bytes\":\(framer.bytes + sent.bytes)},"
            + "\"received\":{\"messages\":\(stdout.assembler.messages),\"bytes\":\(stdout.assembler.bytes)},"
            + "\"duration_s\":\(duration),"
            + "\"close_sent\":\(closeObject(driver?.closeSent)),"
            + "\"close_received\":\(closeObject(driver?.closeReceived)),"
            + "\"ping_rtt_ms\":\(rtt),"
            + "\"delivery_confirmed\":\(deliveryConfirmed.map { String($0) } ?? "null"),"
            + members
            + "\"compression\":\(compressionObject),\"exit\":\(status.rawValue)}").utf8)
        return String(decoding: line, as: UTF8.self)
    }

    /// --stats: wire against payload bytes of compressed messages each way; null when
    /// permessage-deflate was not agreed.
    var compressionObject: String {
        guard let driver, driver.compression != nil else { return "null" }
        func side(_ count: CompressionCount) -> String {
            "{\"messages\":\(count.messages),\"wire_bytes\":\(count.wire),\"payload_bytes\":\(count.payload)}"
        }
        return "{\"received\":\(side(driver.compressionIn)),\"sent\":\(side(driver.compressionOut))}"
    }
}
