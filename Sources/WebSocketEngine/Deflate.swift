import CZlibShims
import WebSocketCore

/// zlib (libz.so.1), loaded with dlopen the first time compression is agreed or asked for:
/// a session that negotiates nothing never maps it (docs/PERFORMANCE.md has the figures).
public enum Zlib {
    /// Loads libz once; throws the loader's reason ("cannot load libz.so.1 ...").
    public static func load() throws(ZlibLoadError) {
        var error = [CChar](repeating: 0, count: 256)
        guard wsp_z_load(&error, error.count) == 0 else {
            throw ZlibLoadError(reason: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }
}

/// libz.so.1 could not be loaded (`reason` is the loader's text).
public struct ZlibLoadError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}

/// An incremental inflater that writes into pooled `ByteBuffer`s and hands out the inflated
/// bytes as pieces of them, with the message's size limit and UTF-8 checked as it goes
/// (the limit is checked before more than `limit + 1` bytes of a message exist).
/// One per connection direction; zlib's state is freed with it.
public final class Inflater {
    private let stream: OpaquePointer
    private let format: CompressionFormat
    private var output: ByteBuffer?
    private let bufferSize: Int
    /// Bytes inflated of the current message.
    public private(set) var messageSize: UInt64 = 0
    /// Largest inflated message, in bytes.
    public var limit: UInt64
    private var utf8 = UTF8Validator()
    private var checksUTF8 = false
    /// The stream ended (BFINAL block, or a gzip/zlib trailer) within this message: the
    /// rest of it (the restored tail, §7.2.3.4) is ignored.
    private var ended = false

    /// Nil when zlib is not loaded or refuses the window (8...15 bits).
    /// - Parameters:
    ///   - windowBits: the largest window the peer compresses with (RFC 7692 §7.1.2).
    ///   - limit: largest inflated message in bytes (`--max-message-size`).
    ///   - bufferSize: size of each output buffer, in bytes.
    public init?(windowBits: Int = 15, format: CompressionFormat = .deflate, limit: UInt64, bufferSize: Int = 64 * 1024) {
        let kind: Int32 = switch format {
        case .deflate: Int32(WSP_Z_RAW)
        case .zlib: Int32(WSP_Z_ZLIB)
        case .gzip: Int32(WSP_Z_GZIP)
        }
        guard let stream = wsp_inflater_new(Int32(windowBits), kind) else { return nil }
        self.stream = stream
        self.format = format
        self.limit = limit
        self.bufferSize = bufferSize
    }

    deinit {
        wsp_zstream_free(stream)
        tail.deallocate()
    }

    /// A new message begins; `text`: its inflated bytes must be UTF-8.
    public func begin(text: Bool) {
        messageSize = 0
        checksUTF8 = text
        utf8.reset()
        ended = false
    }

    /// Inflates `count` bytes at `input`, calling `emit` with each piece of inflated bytes
    /// (valid until the buffer is let go; keep the `ByteBuffer` to keep them). Throws
    /// `.messageTooBig` (1009) once the message inflates past `limit`, `.invalidUTF8` (1007)
    /// for text that is not UTF-8, `.invalidCompressedData` (1007) for data zlib refuses.
    public func feed(_ input: UnsafeRawPointer, count: Int,
                     emit: (ByteBuffer, UnsafeMutableRawPointer, Int) -> Void) throws(ReceiveError) {
        var offset = 0
        while !ended {
            if output == nil || output!.free < 512 {
                if output == nil { output = ByteBuffer(capacity: bufferSize) }
                else { ByteBuffer.reuse(&output!, orMake: bufferSize) }
            }
            let buffer = output!
            let allowed = limit - min(messageSize, limit) + 1
            let room = Int(min(UInt64(buffer.free), allowed))
            var consumed = 0
            var produced = 0
            let result = wsp_inflate(stream, input + offset, count - offset, buffer.end, room, &consumed, &produced)
            offset += consumed
            if produced > 0 {
                let start = buffer.end
                if checksUTF8, let bad = utf8.validate(start, count: produced) {
                    let byte = start.load(fromByteOffset: bad, as: UInt8.self)
                    throw .invalidUTF8("text message is not valid UTF-8 once inflated (byte 0x\(String(byte, radix: 16, uppercase: true)) at offset \(messageSize + UInt64(bad)))")
                }
                messageSize += UInt64(produced)
                if messageSize > limit { throw .messageTooBig(size: messageSize, limit: limit) }
                buffer.count += produced
                emit(buffer, start, produced)
            }
            switch result {
            case Int32(WSP_Z_OK):
                break
            case Int32(WSP_Z_STREAM_END):
                ended = true
                _ = wsp_zstream_reset(stream)
            case Int32(WSP_Z_BUF_ERROR):
                return  // needs more input
            default:
                let why = wsp_zstream_message(stream).map { String(cString: $0) } ?? "zlib error \(result)"
                throw .invalidCompressedData("a compressed message does not inflate (\(why))")
            }
            if offset >= count && produced < room { return }
        }
    }

    /// The message's last frame ended: restores the 0x00 0x00 0xff 0xff tail that the
    /// sender removed (RFC 7692 §7.2.2), checks the text ends on a code point, and resets
    /// the window when the peer does not keep its context (`resetsContext`).
    public func finish(resetsContext: Bool, emit: (ByteBuffer, UnsafeMutableRawPointer, Int) -> Void) throws(ReceiveError) {
        if format == .deflate {
            try feed(tail, count: 4, emit: emit)
        } else if !ended {
            throw .invalidCompressedData("a compressed message ends before its \(format) stream")
        }
        if checksUTF8 && !utf8.isComplete {
            throw .invalidUTF8("text message ends in the middle of a UTF-8 sequence once inflated")
        }
        if resetsContext && !ended { _ = wsp_zstream_reset(stream) }
        if format != .deflate { _ = wsp_zstream_reset(stream) }
    }

    /// Lets go of the output buffer (the connection is idle; pieces handed out keep theirs).
    public func releaseBuffer() { output = nil }

    /// 0x00 0x00 0xff 0xff: an empty stored block's LEN and NLEN (§7.2.2).
    private let tail: UnsafeMutableRawPointer = {
        let bytes = UnsafeMutableRawPointer.allocate(byteCount: 4, alignment: 4)
        bytes.storeBytes(of: 0xFFFF_0000 as UInt32, as: UInt32.self)
        return bytes
    }()
}

/// Compresses outgoing messages for permessage-deflate (RFC 7692 §7.2.1): each frame's
/// payload is deflated with a sync flush; the last frame of a message loses the
/// 0x00 0x00 0xff 0xff tail. zlib's state is made on the first compressed message.
public final class Deflater {
    private var stream: OpaquePointer?
    private let windowBits: Int
    private let memoryLevel: Int
    private let resetsContext: Bool
    private var scratch: UnsafeMutableRawPointer
    private var scratchSize: Int
    /// Bytes zlib made for the current message so far.
    private var messageOutput = 0

    /// Nil for a window below 9 bits (zlib cannot make such raw streams; such a connection
    /// sends uncompressed messages, which is always allowed).
    public init?(windowBits: Int, memoryLevel: Int, resetsContext: Bool) {
        guard (9...15).contains(windowBits) else { return nil }
        self.windowBits = windowBits
        self.memoryLevel = memoryLevel
        self.resetsContext = resetsContext
        // Made on the first compressed message (and again after `releaseScratch`).
        scratchSize = 0
        scratch = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 16)
    }

    deinit {
        if let stream { wsp_zstream_free(stream) }
        scratch.deallocate()
    }

    /// Deflates one frame's payload; the bytes stay valid until the next call. Nil if zlib
    /// cannot make its state (out of memory): the caller sends the message uncompressed.
    ///
    /// Only the last frame of a message is flushed (a sync flush, whose 0x00 0x00 0xff 0xff
    /// is cut, §7.2.1); earlier ones give what zlib has made so far, often nothing (the
    /// caller then need not send a frame). A flush per frame made an echo of 256-byte
    /// fragments send as many fragments, each with a flush: worse compression, and a peer
    /// working per frame (Autobahn 12.2.15: 44 s). The whole message's data then ends with
    /// the one tail, also when its last frame has no bytes of its own.
    public func compress(_ payload: UnsafeRawPointer?, count: Int, final: Bool) -> UnsafeRawBufferPointer? {
        if stream == nil {
            stream = wsp_deflater_new(Int32(windowBits), Int32(memoryLevel), 6)
            if stream == nil { return nil }
        }
        guard let stream else { return nil }
        var length = 0
        var offset = 0
        let needed = count + count / 1000 + 64
        if needed > scratchSize { grow(to: max(needed, Deflater.scratchFloor)) }
        let flush = final ? Int32(WSP_Z_SYNC_FLUSH) : Int32(WSP_Z_NO_FLUSH)
        while true {
            var consumed = 0
            var produced = 0
            let input = payload.map { $0 + offset } ?? UnsafeRawPointer(scratch)
            let result = wsp_deflate(stream, input, count - offset, scratch + length, scratchSize - length,
                                     &consumed, &produced, flush)
            offset += consumed
            length += produced
            messageOutput += produced
            if result != Int32(WSP_Z_OK) && result != Int32(WSP_Z_BUF_ERROR) { return nil }
            // Done when the input is taken and zlib left room (the flush is complete).
            if offset >= count && length < scratchSize { break }
            grow(to: scratchSize * 2)
        }
        if final {
            if length >= 4 && scratch.loadUnaligned(fromByteOffset: length - 4, as: UInt32.self) == 0xFFFF_0000 {
                length -= 4
            }
            // An empty message right after another: zlib's second flush in a row adds
            // nothing, but the receiver restores a tail, which needs its block header in
            // front: 0x00, an empty message's deflate (RFC 7692 §7.2.3.6). Found by fuzz/inflate.
            if messageOutput == 0 {
                scratch.storeBytes(of: 0, as: UInt8.self)
                length = 1
            }
            messageOutput = 0
            if resetsContext { _ = wsp_zstream_reset(stream) }
        }
        return UnsafeRawBufferPointer(start: scratch, count: length)
    }

    /// The output buffer's smallest size, in bytes.
    static let scratchFloor = 16 * 1024

    /// Lets go of the output buffer (the connection is idle; zlib's state stays, as the
    /// context must): 16 KiB less per idle client. The next `compress` makes a new one.
    public func releaseScratch() {
        guard scratchSize > 0 else { return }
        scratch.deallocate()
        scratch = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 16)
        scratchSize = 0
    }

    private func grow(to size: Int) {
        let bigger = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        bigger.copyMemory(from: scratch, byteCount: scratchSize)
        scratch.deallocate()
        scratch = bigger
        scratchSize = size
    }
}

/// Compressed bytes on the wire against the payload they carry, one direction.
public struct CompressionCount: Sendable, Equatable {
    /// Wire bytes of compressed messages, and their payload once inflated (or before deflating).
    public var wire: UInt64 = 0
    public var payload: UInt64 = 0
    public var messages: UInt64 = 0
    public init() {}
}
