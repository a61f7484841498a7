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

extension Wire {
    /// One frame read back from bytes a peer wrote, its payload unmasked.
    package struct ReadFrame {
        package let fin: Bool
        package let opcode: UInt8
        package let masked: Bool
        package let payload: [UInt8]
        /// Header, masking key and payload: where the next frame starts.
        package let size: Int
    }

    /// The first frame of `bytes` (RFC 6455 §5.2: 2-byte header, 16- or 64-bit extended
    /// length, masking key), or nil while `bytes` holds only part of it.
    package static func readFrame(_ bytes: ArraySlice<UInt8>) -> ReadFrame? {
        let start = bytes.startIndex
        guard bytes.count >= 2 else { return nil }
        let masked = bytes[start + 1] & 0x80 != 0
        var length = Int(bytes[start + 1] & 0x7F)
        var at = start + 2
        let extended = length == 126 ? 2 : length == 127 ? 8 : 0
        guard bytes.endIndex - at >= extended + (masked ? 4 : 0) else { return nil }
        if extended > 0 {
            length = bytes[at..<(at + extended)].reduce(0) { $0 << 8 | Int($1) }
            at += extended
        }
        let key = masked ? Array(bytes[at..<(at + 4)]) : []
        at += key.count
        guard length >= 0, bytes.endIndex - at >= length else { return nil }
        var payload = Array(bytes[at..<(at + length)])
        if masked { for i in payload.indices { payload[i] ^= key[i % 4] } }
        return ReadFrame(fin: bytes[start] & 0x80 != 0, opcode: bytes[start] & 0x0F, masked: masked,
                         payload: payload, size: at + length - start)
    }
}
