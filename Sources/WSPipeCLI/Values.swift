import Glibc
import WebSocketCore
import WebSocketEngine
import WSPipeBridge

// Checks and conversions of option values, and the file reading the options need.

/// `path` if it is a readable file; a usage error naming the option otherwise.
func readableFile(_ path: String, option: String) throws(UsageError) -> String {
    guard access(path, R_OK) == 0 else {
        throw UsageError("cannot read \(option) file '\(path)': \(String(cString: strerror(errno)))", pointsAtHelp: false)
    }
    return path
}

/// A bearer token given as it is (`source`: the option or variable, for the message).
func checkToken(_ token: String, source: String) throws(UsageError) {
    do throws(BearerToken.Problem) {
        _ = try BearerToken(token)
    } catch {
        throw tokenError(error, source: source)
    }
}

/// The bearer token in the file at `path` (--bearer-file), by `BearerToken`'s rule.
func tokenFromFile(_ path: String, readFile: (String) -> [UInt8]?) throws(UsageError) -> String {
    guard let bytes = readFile(path) else {
        throw UsageError("cannot read --bearer-file '\(path)': \(whyUnreadable(path))", pointsAtHelp: false)
    }
    do throws(BearerToken.Problem) {
        return try BearerToken(fileContents: bytes).value
    } catch {
        throw tokenError(error, source: "--bearer-file '\(path)'")
    }
}

private func tokenError(_ problem: BearerToken.Problem, source: String) -> UsageError {
    // A file that is not text is no mistake of syntax: --help would not help.
    UsageError("\(source): \(problem.text)", pointsAtHelp: problem != .notUTF8)
}

func checkHeaderValue(_ value: String, option: String) throws(UsageError) {
    guard value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
        throw UsageError("\(option) contains CR, LF or another control character")
    }
}

/// An Origin as a browser sends it (RFC 6454 §6.1): `scheme://host[:port]`, or `null`. A
/// bare host or a trailing slash matches no browser's Origin, so every browser got 403.
func checkOrigin(_ value: String, option: String) throws(UsageError) {
    if value == "null" { return }
    let parts = value.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, let scheme = parts.first, !scheme.isEmpty,
          scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }) else {
        let host = value.split(separator: "/").first(where: { !$0.isEmpty && !$0.hasSuffix(":") }) ?? "example.com"
        throw UsageError("\(option) '\(value)' is not an origin: write it as a browser sends it, scheme://host[:port] "
                         + "(e.g. https://\(host))")
    }
    let rest = parts[1]
    guard !rest.isEmpty, !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else {
        let trimmed = value.hasSuffix("/") ? String(value.dropLast()) : value
        throw UsageError("\(option) '\(value)' is not an origin: an Origin has no path, not even '/'"
                         + (rest.dropLast().contains("/") ? "" : " (write \(trimmed))"))
    }
}

/// A subprotocol name must be an HTTP token.
func checkSubprotocol(_ name: String, option: String) throws(UsageError) {
    guard !name.isEmpty, name.utf8.allSatisfy({ byte in
        byte > 0x20 && byte < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains(byte)
    }) else {
        throw UsageError("\(option) '\(name)' is not a valid subprotocol name (an HTTP token)")
    }
}

/// "65536", "64K", "64KiB", "1M", "1MiB", "1G" (binary multiples) as bytes.
func parseSize(_ text: String, option: String) throws(UsageError) -> UInt64 {
    var digits = Substring(text)
    var multiplier: UInt64 = 1
    for (suffix, factor) in [("KiB", UInt64(1) << 10), ("MiB", 1 << 20), ("GiB", 1 << 30),
                             ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)] where text.hasSuffix(suffix) {
        digits = digits.dropLast(suffix.count)
        multiplier = factor
        break
    }
    guard let number = UInt64(digits) else {
        throw UsageError("\(option) '\(text)' is not a size (bytes, or with K, M, G suffixes)")
    }
    let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
    guard !overflow else { throw UsageError("\(option) '\(text)' is too large") }
    return bytes
}

/// `N/s[:BURST]`: `amount` reads N and BURST.
func parseRate(_ text: String, option: String, amount: (Substring) -> Double?) throws(UsageError) -> RateLimit {
    do throws(RateLimit.Problem) {
        return try RateLimit.parse(text, amount: amount)
    } catch {
        throw UsageError("\(option) '\(text.prefix(40))' \(error)")
    }
}

/// A positive number of seconds ("5", "0.25").
func parseSeconds(_ text: String, option: String) throws(UsageError) -> Double {
    guard let seconds = Double(text), seconds.isFinite, seconds > 0 else {
        throw UsageError("\(option) '\(text)' is not a positive number of seconds")
    }
    guard seconds <= 1e9 else { throw UsageError("\(option) '\(text)' is too large (at most 1e9 seconds)") }
    return seconds
}

/// Why `readWholeFile` gave nothing for `path`, in words (for the error message).
func whyUnreadable(_ path: String) -> String { SmallFile.whyUnreadable(path) }

/// The whole file at `path` (at most 1 MiB), or nil if it cannot be read.
public func readWholeFile(_ path: String) -> [UInt8]? { SmallFile.contents(of: path) }

extension String {
    func replacingPrefix(_ prefix: String, _ replacement: String) -> String {
        hasPrefix(prefix) ? replacement + dropFirst(prefix.count) : self
    }
}
