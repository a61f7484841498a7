import WebSocketCore
import WebSocketEngine

/// --send-file: the file framed as stdin is (lines, or with --jsonl message objects, pings
/// included), sent after every handshake. Checked once when the options are read, so a
/// file that would fail at a connection's start fails before any connection instead.
struct SendFile {
    let bytes: [UInt8]
    let jsonLines: Bool
    let separator: UInt8

    /// Frames the file into `sink`; its pings (with --jsonl) are the actions returned.
    func frame(into sink: some MessageSink) throws(InputError) -> (actions: [InputAction], messages: UInt64, bytes: UInt64) {
        var framer = InputFramer(mode: jsonLines ? .jsonLines : .lines(separator: separator))
        let buffer = ByteBuffer(capacity: max(1, bytes.count))
        bytes.withUnsafeBytes { if let base = $0.baseAddress { buffer.base.copyMemory(from: base, byteCount: bytes.count) } }
        buffer.count = bytes.count
        let actions = try framer.consume(buffer, into: sink) + framer.finish(into: sink)
        return (actions, framer.messages, framer.bytes)
    }

    /// Why the file cannot be sent, as a sentence naming `path`; nil when it can.
    static func problem(_ bytes: [UInt8], path: String, jsonLines: Bool, separator: UInt8) -> String? {
        let actions: [InputAction]
        do throws(InputError) {
            actions = try SendFile(bytes: bytes, jsonLines: jsonLines, separator: separator).frame(into: Discarding()).actions
        } catch {
            switch error {
            case .invalidUTF8(let line, let column, let byte):
                return "--send-file '\(path)': line \(line) is not valid UTF-8 (\(InputError.where(byte, column: column))); "
                    + "its lines are sent as text messages"
            case .invalidJSONLine(let line, let why):
                return "--send-file '\(path)': line \(line) is not a --jsonl message: \(why)"
            default:
                return "--send-file '\(path)': \(error.description)"
            }
        }
        if actions.contains(where: { if case .close = $0 { true } else { false } }) {
            return "--send-file '\(path)' has a close object: it would end every connection as it starts (remove it)"
        }
        return nil
    }

    private final class Discarding: MessageSink {
        func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {}
        func send(_ opcode: Opcode, fin: Bool, bytes: [UInt8]) {}
    }
}

/// --send-file's problem for the option reader (see `SendFile.problem`).
public func sendFileProblem(_ bytes: [UInt8], path: String, jsonLines: Bool, separator: UInt8) -> String? {
    SendFile.problem(bytes, path: path, jsonLines: jsonLines, separator: separator)
}
