// Shared by every fuzz target (fuzz/run compiles it into each one).

/// `precondition` that keeps its message in -O builds (where precondition's is dropped).
@inline(__always)
func check(_ condition: Bool, _ message: @autoclosure () -> String = "", file: StaticString = #file, line: UInt = #line) {
    if !condition { checkFailed(message(), file: file, line: line) }
}

@inline(never)
func checkFailed(_ message: String, file: StaticString = #file, line: UInt = #line) -> Never {
    fatalError("fuzz check failed: \(message)", file: file, line: line)
}

/// An exact-size heap copy of `bytes` (nil base when empty and `nilWhenEmpty`), so that
/// AddressSanitizer reports any read past the end. Deallocate with `release`.
func exactCopy<C: Collection>(_ bytes: C, nilWhenEmpty: Bool = false) -> UnsafeRawBufferPointer where C.Element == UInt8 {
    if bytes.isEmpty && nilWhenEmpty { return UnsafeRawBufferPointer(start: nil, count: 0) }
    let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
    let copied: Void? = bytes.withContiguousStorageIfAvailable { source in
        if let base = source.baseAddress { storage.baseAddress!.copyMemory(from: base, byteCount: source.count) }
    }
    if copied == nil { _ = storage.initializeMemory(as: UInt8.self, from: bytes) }
    return UnsafeRawBufferPointer(storage)
}

func release(_ buffer: UnsafeRawBufferPointer) {
    if buffer.baseAddress != nil { buffer.deallocate() }
}

/// The index UTF8Validator should report, from Swift's decoder: nil for valid text.
func referenceFirstInvalid(_ bytes: [UInt8]) -> Int? {
    var iterator = bytes.makeIterator()
    var parser = Unicode.UTF8.ForwardParser()
    var offset = 0
    while true {
        switch parser.parseScalar(from: &iterator) {
        case .valid(let scalar): offset += scalar.count
        case .emptyInput: return nil
        case .error(let length):
            if !(0xC2...0xF4).contains(bytes[offset]) { return offset }  // not a lead byte
            return offset + length  // the byte after the maximal subpart (count if truncated)
        }
    }
}

/// The transport's helper IPAddress.swift uses (it lives in TCPConnector.swift, not compiled
/// into the targets that take IPAddress.swift: tokens, proxyheader, clientaddress).
func cString(_ chars: [CChar]) -> String {
    String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
