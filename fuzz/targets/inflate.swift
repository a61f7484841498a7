// libFuzzer target `inflate`: the engine's permessage-deflate codec (Sources/WebSocketEngine/
// Deflate.swift over libz through CZlibShims) on arbitrary compressed messages, and the
// deflater's frames inflated back.
//
// Compiled into one module with Sources/WebSocketCore/*.swift, Deflate.swift and
// ByteBuffer.swift (see fuzz/run).
//
// Input: byte 0: bits 0-2 the inflater's window (8 + n), bit 3 text, bit 4 a 1 KiB limit (else
// 1 MiB), bit 5 reset the context after each message, bits 6-7 the format (deflate, zlib,
// gzip; 3 = deflate). Byte 1: cut stride. The rest: messages separated by "\xff\xfe",
// each fed in pieces of the stride (0: whole).
//
// Checks:
//   - nothing crashes, leaks or reads out of bounds; each message either inflates or throws
//     one of .messageTooBig, .invalidUTF8, .invalidCompressedData
//   - never more than limit bytes reported for a message, and .messageTooBig only past it
//   - inflated text that is accepted is UTF-8
//   - after an error the inflater is dropped (as the driver does); a fresh one goes on
//   - round trip: the input bytes deflated by `Deflater` (whole, in fuzzed fragments and as
//     an echo does it: fragments then an empty final one; window 9-15, context kept or
//     reset) inflate back to the same bytes, message after message, with the tail removed
import CZlibShims

private let loaded: Bool = (try? Zlib.load()) != nil

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzInflate(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(loaded, "libz.so.1 loads")
    guard let data, size >= 2 else { return 0 }
    let flags = data[0]
    let stride = Int(data[1])
    let bytes = Array(UnsafeBufferPointer(start: data + 2, count: size - 2))
    let windowBits = 8 + Int(flags & 7)
    let text = flags & 8 != 0
    let limit: UInt64 = flags & 16 != 0 ? 1024 : 1 << 20
    let resets = flags & 32 != 0
    let format: CompressionFormat = switch flags >> 6 {
    case 1: .zlib
    case 2: .gzip
    default: .deflate
    }
    let messages = split(bytes)

    // Arbitrary bytes as compressed messages.
    var inflater = Inflater(windowBits: max(windowBits, 9), format: format, limit: limit, bufferSize: 4096)
    for message in messages {
        guard let current = inflater else { break }
        var produced = 0
        var sawText: [UInt8] = []
        let emit: (ByteBuffer, UnsafeMutableRawPointer, Int) -> Void = { _, start, n in
            produced += n
            if text && sawText.count < 1 << 16 { sawText += UnsafeRawBufferPointer(start: start, count: n) }
        }
        do throws(ReceiveError) {
            current.begin(text: text)
            try feed(message, stride: stride) { base, count throws(ReceiveError) in try current.feed(base, count: count, emit: emit) }
            try current.finish(resetsContext: resets, emit: emit)
            check(UInt64(produced) <= limit, "\(produced) bytes reported past the \(limit)-byte limit")
            if text && produced < 1 << 16 { check(UTF8Validator.isValid(sawText), "accepted text is not UTF-8") }
        } catch {
            switch error {
            case .messageTooBig(let size, let max): check((size ?? 0) > max && max == limit, "1009 below the limit")
            case .invalidUTF8, .invalidCompressedData: break
            default: check(false, "unexpected error \(error)")
            }
            check(UInt64(produced) <= limit + 1, "more than limit + 1 bytes before 1009")
            inflater = Inflater(windowBits: max(windowBits, 9), format: format, limit: limit, bufferSize: 4096)
        }
    }

    // Round trip through our own deflater.
    let bits = max(windowBits, 9)
    guard let deflater = Deflater(windowBits: bits, memoryLevel: 1 + Int(flags >> 5) % 9, resetsContext: resets),
          let back = Inflater(windowBits: bits, limit: 1 << 24, bufferSize: 4096) else {
        check(false, "zlib makes state for \(bits) bits")
        return 0
    }
    for (index, message) in messages.enumerated() {
        var frames: [[UInt8]] = []
        let pattern = (index + Int(flags)) % 3
        let piece = stride == 0 ? max(message.count, 1) : stride
        var offset = 0
        repeat {
            let end = pattern == 0 ? message.count : min(offset + piece, message.count)
            let final = end == message.count && pattern != 2
            frames.append(compress(deflater, Array(message[offset..<end]), final: final))
            offset = end
        } while offset < message.count
        if pattern == 2 { frames.append(compress(deflater, [], final: true)) }
        var out: [UInt8] = []
        let collect: (ByteBuffer, UnsafeMutableRawPointer, Int) -> Void = { _, start, n in out += UnsafeRawBufferPointer(start: start, count: n) }
        do throws(ReceiveError) {
            back.begin(text: false)
            for frame in frames {
                try feed(frame, stride: 0) { base, count throws(ReceiveError) in try back.feed(base, count: count, emit: collect) }
            }
            try back.finish(resetsContext: resets, emit: collect)
        } catch {
            check(false, "our own deflate output does not inflate: \(error)")
        }
        check(out == message, "round trip differs (\(out.count) of \(message.count) bytes, pattern \(pattern))")
    }
    return 0
}

private func split(_ bytes: [UInt8]) -> [[UInt8]] {
    var messages: [[UInt8]] = [[]]
    var i = 0
    while i < bytes.count {
        if bytes[i] == 0xff && i + 1 < bytes.count && bytes[i + 1] == 0xfe {
            messages.append([])
            i += 2
        } else {
            messages[messages.count - 1].append(bytes[i])
            i += 1
        }
    }
    return messages
}

/// Feeds exact-size heap copies (AddressSanitizer sees any read past a piece).
private func feed(_ message: [UInt8], stride: Int, _ body: (UnsafeRawPointer, Int) throws(ReceiveError) -> Void) throws(ReceiveError) {
    let step = stride == 0 ? max(message.count, 1) : stride
    var offset = 0
    repeat {
        let end = min(offset + step, message.count)
        let copy = exactCopy(message[offset..<end])
        defer { release(copy) }
        try body(copy.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, end - offset)
        offset = end
    } while offset < message.count
}

private func compress(_ deflater: Deflater, _ payload: [UInt8], final: Bool) -> [UInt8] {
    let copy = exactCopy(payload, nilWhenEmpty: true)
    defer { release(copy) }
    guard let bytes = deflater.compress(copy.baseAddress, count: payload.count, final: final) else {
        check(false, "zlib refused to deflate")
        return []
    }
    return Array(bytes)
}
