/// The two forms of request target a server takes (RFC 9112 §3.2), read the one way
/// everywhere a server looks at a target's path: the upgrade (`ServerHandshake`), --path,
/// --health, --metrics, --dir and --static (`RequestPath`).
public enum RequestTarget {
    /// `target` in origin-form ("/p?q"). An absolute-form target ("http://host:8080/p?q",
    /// which a server MUST accept, §3.2.2) loses its scheme and authority ("/" when it has
    /// no path: "http://h?q" is "/?q"); the authority is not looked at (Host is the one a
    /// server reads). Nil for any other form: asterisk-form ("*"), authority-form
    /// ("host:443"), a relative name, an empty authority ("http:///x"). A "#" is left to the
    /// caller.
    public static func originForm(_ target: String) -> Substring? {
        let bytes = target.utf8
        guard let first = bytes.first else { return nil }
        if first == slash { return Substring(target) }
        // scheme "://" authority, then path-abempty and the query (RFC 3986 §3).
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), isScheme(bytes[..<colon]),
              bytes[colon...].starts(with: "://".utf8) else { return nil }
        let authority = target[bytes.index(colon, offsetBy: 3)...]
        guard let start = authority.utf8.first, start != slash, start != question else { return nil }
        guard let end = authority.utf8.firstIndex(where: { $0 == slash || $0 == question }) else { return "/" }
        let rest = target[end...]
        return rest.utf8.first == slash ? rest : Substring("/" + rest)
    }

    /// The path of `target` (its origin-form up to "?"), nil when it is in neither form.
    public static func path(_ target: String) -> Substring? {
        guard let origin = originForm(target) else { return nil }
        return origin.utf8.firstIndex(of: question).map { origin[..<$0] } ?? origin
    }

    private static let slash = UInt8(ascii: "/"), question = UInt8(ascii: "?")

    /// ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 §3.1).
    private static func isScheme(_ name: Substring.UTF8View) -> Bool {
        guard let first = name.first, isLetter(first) else { return false }
        return name.allSatisfy { isLetter($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-")
            || $0 == UInt8(ascii: ".") }
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (0x61...0x7A).contains(byte | 0x20) }
}
