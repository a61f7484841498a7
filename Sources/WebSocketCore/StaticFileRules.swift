/// The HTTP rules of serving a file (RFC 9110), without I/O: dates, validators, one byte
/// range, content types. The engine's static-file exchange asks these and opens the file.

/// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", RFC 9110 §5.6.7), the only date form we
/// send; parsing accepts only it too (browsers send back the Last-Modified they were given).
public enum HTTPDate {
    private static let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The date of `seconds` since the Unix epoch (UTC).
    public static func format(_ seconds: Int64) -> String {
        let day = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let time = seconds - day * 86_400
        let (year, month, dayOfMonth) = civil(fromDays: day)
        let weekday = days[Int(((day % 7) + 7) % 7)]
        return "\(weekday), \(two(dayOfMonth)) \(months[month - 1]) \(four(year)) \(two(Int(time / 3600))):\(two(Int(time / 60 % 60))):\(two(Int(time % 60))) GMT"
    }

    /// Seconds since the epoch of an IMF-fixdate, nil for anything else.
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count == 29, b[3] == UInt8(ascii: ","), b[4] == 0x20, b[7] == 0x20, b[11] == 0x20, b[16] == 0x20,
              b[19] == UInt8(ascii: ":"), b[22] == UInt8(ascii: ":"), b[25] == 0x20,
              String(decoding: b[26..<29], as: UTF8.self) == "GMT",
              days.contains(String(decoding: b[0..<3], as: UTF8.self)),
              let monthIndex = months.firstIndex(of: String(decoding: b[8..<11], as: UTF8.self)),
              let day = number(b[5..<7]), let year = number(b[12..<16]), let hour = number(b[17..<19]),
              let minute = number(b[20..<22]), let second = number(b[23..<25]),
              day >= 1, day <= 31, hour < 24, minute < 60, second <= 60 else { return nil }
        return days(fromCivil: year, monthIndex + 1, day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    private static func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
    private static func four(_ year: Int64) -> String {
        let digits = String(year)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for d in digits {
            guard d >= 0x30, d <= 0x39 else { return nil }
            value = value * 10 + Int(d - 0x30)
        }
        return value
    }

    // Howard Hinnant's days-from-civil and its inverse (proleptic Gregorian calendar).
    private static func civil(fromDays z0: Int64) -> (Int64, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = Int(doy - (153 * mp + 2) / 5 + 1)
        let m = Int(mp < 10 ? mp + 3 : mp - 9)
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    private static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = Int64(month > 2 ? month - 3 : month + 9)
        let doy = (153 * mp + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

/// What a `Range` header asks of a representation of `size` bytes (RFC 9110 §14).
public enum ByteRangeRequest: Equatable, Sendable {
    /// No range, several ranges, another unit or bad syntax: the whole file (a server may
    /// ignore Range, §14.2; we serve one range or none).
    case whole
    /// Bytes `first...last` (206).
    case range(first: UInt64, last: UInt64)
    /// The one range asked for starts past the end (416 with `Content-Range: bytes */size`).
    case unsatisfiable

    /// The request in `value` (the Range header) for a representation of `size` bytes.
    public static func parse(_ value: String, size: UInt64) -> ByteRangeRequest {
        let text = value.utf8.drop { $0 == 0x20 || $0 == 0x09 }
        guard text.count > 6, String(decoding: text.prefix(6), as: UTF8.self).lowercased() == "bytes=" else { return .whole }
        var spec = Array(text.dropFirst(6))
        while let last = spec.last, last == 0x20 || last == 0x09 { spec.removeLast() }
        guard !spec.contains(UInt8(ascii: ",")), let dash = spec.firstIndex(of: UInt8(ascii: "-")) else { return .whole }
        let firstText = spec[..<dash], lastText = spec[(dash + 1)...]
        guard size > 0 else { return .whole }  // no byte of an empty file can be asked for
        if firstText.isEmpty {
            // "-N": the last N bytes.
            guard let suffix = decimal(lastText) else { return .whole }
            guard suffix > 0 else { return .unsatisfiable }
            return .range(first: size - min(suffix, size), last: size - 1)
        }
        guard let first = decimal(firstText) else { return .whole }
        let last: UInt64
        if lastText.isEmpty {
            last = size - 1
        } else {
            guard let given = decimal(lastText), given >= first else { return .whole }
            last = min(given, size - 1)
        }
        return first < size ? .range(first: first, last: last) : .unsatisfiable
    }

    /// 1 to 19 ASCII digits (a larger number is treated as bad syntax, not wrapped).
    private static func decimal(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var value: UInt64 = 0
        for d in digits {
            guard d >= 0x30, d <= 0x39 else { return nil }
            value = value * 10 + UInt64(d - 0x30)
        }
        return value
    }
}

/// A file's validators and the conditional request rules that use them (RFC 9110 §13).
public struct FileValidators: Equatable, Sendable {
    /// A strong entity tag, quoted ("inode-size-mtime" in hex).
    public var etag: String
    /// The modification time, in whole seconds since the epoch.
    public var modified: Int64

    public init(inode: UInt64, size: UInt64, modifiedSeconds: Int64, modifiedNanoseconds: Int64) {
        etag = "\"\(String(inode, radix: 16))-\(String(size, radix: 16))-\(String(modifiedSeconds, radix: 16))\(String(modifiedNanoseconds, radix: 16))\""
        modified = modifiedSeconds
    }

    public var lastModified: String { HTTPDate.format(modified) }

    /// Whether a GET or HEAD with these headers gets 304: If-None-Match decides when it is
    /// present (weak comparison, §13.1.2), even with no tag in it ("" or ","), and
    /// If-Modified-Since only without it (§13.1.3), and only for a date not later than `now`
    /// (seconds since the epoch): a client whose clock is ahead would otherwise keep its
    /// copy of a file changed since (Apache's rule; nginx's default `if_modified_since
    /// exact` answers 304 only for the exact Last-Modified).
    public func notModified(_ head: some HTTPHeaderFields, now: Int64) -> Bool {
        if !head.values("If-None-Match").isEmpty {
            return head.listValues("If-None-Match").contains { $0 == "*" || FileValidators.opaque($0) == FileValidators.opaque(etag) }
        }
        guard let since = head.values("If-Modified-Since").first, let date = HTTPDate.parse(since), date <= now else { return false }
        return modified <= date
    }

    /// Whether a Range may be honoured: no If-Range, or one naming this file as it is now
    /// (strong comparison of the tag, or the exact Last-Modified date, §13.1.5).
    public func rangeApplies(_ head: some HTTPHeaderFields) -> Bool {
        guard let condition = head.values("If-Range").first else { return true }
        if condition.hasPrefix("\"") { return condition == etag }
        return HTTPDate.parse(condition) == modified
    }

    private static func opaque(_ tag: String) -> Substring {
        tag.hasPrefix("W/") ? tag.dropFirst(2) : Substring(tag)
    }
}

/// The Content-Type of a file by its extension; text types say UTF-8.
public enum ContentTypes {
    static let table: [String: String] = [
        "html": "text/html; charset=utf-8", "htm": "text/html; charset=utf-8", "css": "text/css; charset=utf-8",
        "js": "text/javascript; charset=utf-8", "mjs": "text/javascript; charset=utf-8",
        "json": "application/json; charset=utf-8", "map": "application/json; charset=utf-8",
        "txt": "text/plain; charset=utf-8", "md": "text/markdown; charset=utf-8", "csv": "text/csv; charset=utf-8",
        "xml": "text/xml; charset=utf-8", "svg": "image/svg+xml; charset=utf-8",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "avif": "image/avif", "ico": "image/x-icon", "wasm": "application/wasm", "pdf": "application/pdf",
        "woff": "font/woff", "woff2": "font/woff2", "ttf": "font/ttf", "otf": "font/otf",
        "mp4": "video/mp4", "webm": "video/webm", "mp3": "audio/mpeg", "ogg": "audio/ogg", "wav": "audio/wav",
        "zip": "application/zip", "gz": "application/gzip", "tar": "application/x-tar",
    ]

    /// The type for a file named `name` (application/octet-stream when the extension is not known).
    public static func forName(_ name: String) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "application/octet-stream" }
        return table[name[name.index(after: dot)...].lowercased()] ?? "application/octet-stream"
    }
}
