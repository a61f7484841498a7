// libFuzzer target `staticrules`: the static-file rules of StaticFileRules.swift (pure).
//
// Input: bytes 0-7 a size and a time (little-endian), then text cut at the first 0x0A
// into a Range value and a header line for the validators (If-None-Match when byte 0
// bit 0 is set, else If-Modified-Since), the rest also a date and a file name.
//
// Checks:
//   - ByteRangeRequest.parse: a range lies inside the file (first <= last < size); an
//     unsatisfiable one only for a file with bytes; a value without "bytes=" is the whole file
//   - HTTPDate: format(t) is 29 bytes and parses back to t (1970-9999); whatever parses
//     formats to 29 bytes
//   - FileValidators: with If-None-Match given, If-Modified-Since changes nothing (RFC 9110
//     §13.1.3); the tag matches itself, weakly and strongly
//   - ContentTypes: a type with no CR, LF or control byte for any name
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStaticRules(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 8 else { return 0 }
    var fileSize: UInt64 = 0
    for i in 0..<4 { fileSize |= UInt64(data[i]) << (8 * UInt64(i)) }
    fileSize >>= UInt64(data[0] & 0x7)  // small sizes too
    var time: Int64 = 0
    for i in 4..<8 { time |= Int64(data[i]) << (8 * Int64(i - 4)) }
    time = (time * 59) % 253_402_300_800
    let text = String(decoding: UnsafeBufferPointer(start: data + 8, count: size - 8), as: UTF8.self)
    let parts = text.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
    let range = parts[0]

    switch ByteRangeRequest.parse(range, size: fileSize) {
    case .range(let first, let last):
        check(first <= last && last < fileSize, "range \(first)-\(last) outside a file of \(fileSize) bytes: \(range)")
    case .unsatisfiable:
        check(fileSize > 0, "an empty file's range is unsatisfiable rather than ignored")
    case .whole:
        break
    }
    if !range.lowercased().drop(while: { $0 == " " || $0 == "\t" }).hasPrefix("bytes=") {
        check(ByteRangeRequest.parse(range, size: fileSize) == .whole, "no bytes= unit, yet a range: \(range)")
    }

    let formatted = HTTPDate.format(time)
    check(formatted.utf8.count == 29, "date \(formatted) is not 29 bytes")
    check(HTTPDate.parse(formatted) == time, "\(formatted) does not parse back to \(time)")
    for candidate in parts.dropFirst() {
        if let parsed = HTTPDate.parse(candidate) {
            // Years 0000-9999: the date formats back to 29 bytes that parse to it.
            check(HTTPDate.format(parsed).utf8.count == 29 && HTTPDate.parse(HTTPDate.format(parsed)) == parsed,
                  "\(candidate) parsed to \(parsed), formatted \(HTTPDate.format(parsed))")
        }
    }

    struct Fields: HTTPHeaderFields { var headers: [HTTPHeader] }
    let file = FileValidators(inode: UInt64(data[1]), size: fileSize, modifiedSeconds: time, modifiedNanoseconds: Int64(data[2]))
    let value = parts.count > 1 ? parts[1] : ""
    let now: Int64 = 253_402_300_799  // 9999-12-31: no date the parser takes is later
    if data[0] & 1 != 0 {
        let alone = file.notModified(Fields(headers: [HTTPHeader(name: "If-None-Match", value: value)]), now: now)
        for since in [formatted, HTTPDate.format(0), HTTPDate.format(253_402_300_799), value] {
            let both = file.notModified(Fields(headers: [HTTPHeader(name: "If-None-Match", value: value),
                                                         HTTPHeader(name: "If-Modified-Since", value: since)]), now: now)
            check(both == alone, "If-Modified-Since changed the answer beside If-None-Match '\(value)'")
        }
    } else {
        _ = file.notModified(Fields(headers: [HTTPHeader(name: "If-Modified-Since", value: value)]), now: now)
        if let date = HTTPDate.parse(value) {
            check(!file.notModified(Fields(headers: [HTTPHeader(name: "If-Modified-Since", value: value)]), now: date - 1),
                  "If-Modified-Since later than now gave 304")
        }
    }
    check(file.notModified(Fields(headers: [HTTPHeader(name: "If-None-Match", value: file.etag)]), now: now), "the tag does not match itself")
    check(file.notModified(Fields(headers: [HTTPHeader(name: "If-None-Match", value: "W/" + file.etag)]), now: now), "weak comparison")
    check(file.rangeApplies(Fields(headers: [HTTPHeader(name: "If-Range", value: file.etag)])), "If-Range with the tag")
    check(file.rangeApplies(Fields(headers: [HTTPHeader(name: "If-Range", value: file.lastModified)])), "If-Range with the date")

    let type = ContentTypes.forName(parts.last ?? "")
    check(!type.isEmpty && type.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }, "content type \(type)")
    return 0
}
