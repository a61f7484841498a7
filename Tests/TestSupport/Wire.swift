// Server bytes built by hand (frames independent of WebSocketCore's encoder).

package enum Wire {
    /// A correct 101 (raw.py fills in {accept}).
    package static let switching = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n".utf8)

    /// A server frame (unmasked unless `mask` is given).
    package static func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0, mask: [UInt8]? = nil) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | (rsv << 4) | opcode]
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        if payload.count < 126 {
            bytes.append(maskBit | UInt8(payload.count))
        } else if payload.count < 65536 {
            bytes += [maskBit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            bytes.append(maskBit | 127)
            bytes += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (8 * UInt64($0))) & 0xFF) }
        }
        if let mask {
            bytes += mask
            bytes += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        } else {
            bytes += payload
        }
        return bytes
    }

    package static func text(_ text: String, fin: Bool = true) -> [UInt8] { frame(0x1, Array(text.utf8), fin: fin) }

    package static func close(_ code: UInt16, _ reason: [UInt8] = []) -> [UInt8] {
        frame(0x8, [UInt8(code >> 8), UInt8(code & 0xFF)] + reason)
    }
}
