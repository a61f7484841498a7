// libFuzzer target `url`: WebSocketURL(parsing:) on arbitrary text.
//
// Compiled into the WebSocketCore module itself (see fuzz/run).
//
// Input: byte 0 bit 0 set: the text after it gets user information with a known secret
// inserted right after its first "://" (if any); the rest is decoded as UTF-8 (invalid
// bytes become U+FFFD).
//
// Checks:
//   - parsing never crashes; errors' descriptions never contain the secret user name or
//     password, and neither do a parsed URL's description, hostHeader or requestTarget
//   - requestTarget starts with "/" and holds only printable ASCII (it goes into the request
//     line); host and hostHeader hold no space, control or non-ASCII byte
//   - the port is the explicit one or the scheme's default
//   - the description parses back to the same URL without user information
//   - the request bytes of a handshake for the URL have exactly one CRLF per header line

let secretUser = "Zq7SecretUser"
let secretPassword = "Xw9SecretPass"

func leaks(_ text: String) -> Bool { text.contains(secretUser) || text.contains(secretPassword) }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzURL(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 1 else { return 0 }
    var bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    var withSecret = false
    if data[0] & 1 != 0, let scheme = bytes.firstRange(of: Array("://".utf8)),
       !String(decoding: bytes, as: UTF8.self).contains("Secret") {
        bytes.insert(contentsOf: Array("\(secretUser):\(secretPassword)@".utf8), at: scheme.upperBound)
        withSecret = true
    }
    let text = String(decoding: bytes, as: UTF8.self)

    let url: WebSocketURL
    do {
        url = try WebSocketURL(parsing: text)
    } catch {
        if withSecret { check(!leaks(error.description), "an error message shows the user information: \(error)") }
        return 0
    }
    if withSecret {
        check(!leaks(url.description), "description shows the user information: \(url.description)")
        check(!leaks(url.hostHeader) && !leaks(url.requestTarget) && !leaks(url.host), "user information outside user/password")
    }
    check(url.requestTarget.utf8.first == UInt8(ascii: "/"), "request target \(url.requestTarget) does not start with /")
    check(url.requestTarget.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "request target with a space, control or non-ASCII byte")
    check(!url.host.isEmpty, "empty host")
    check(url.host.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "host with a space, control or non-ASCII byte")
    check(url.hostHeader.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "Host header with a space, control or non-ASCII byte")
    if !url.hasExplicitPort { check(url.port == (url.isSecure ? 443 : 80), "default port") }
    check(url.port != 0, "port 0")
    _ = url.isIPLiteral

    // The printable form is a URL that parses to the same thing, minus user information.
    let again: WebSocketURL
    do {
        again = try WebSocketURL(parsing: url.description)
    } catch {
        checkFailed("description \(url.description) does not parse: \(error)")
    }
    var expected = url
    expected.user = nil
    expected.password = nil
    check(again == expected, "description \(url.description) parses to \(again), not \(expected)")

    // The request built for it: header lines end in CRLF, nothing else contains CR or LF.
    let request = ClientHandshake(url: url, key: "dGhlIHNhbXBsZSBub25jZQ==").requestBytes
    let lines = request.split(separator: 0x0A, omittingEmptySubsequences: false)
    for line in lines.dropLast() {
        check(line.last == 0x0D && !line.dropLast().contains(0x0D), "request line with a stray CR or LF")
    }
    check(lines.last?.isEmpty == true && lines.dropLast().last?.elementsEqual([0x0D]) == true, "request does not end in CRLF CRLF")
    return 0
}
