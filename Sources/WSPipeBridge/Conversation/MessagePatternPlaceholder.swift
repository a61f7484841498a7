// THROWAWAY placeholder until the `match` branch's MessagePattern.swift is merged: delete then.
import Glibc

package struct MessagePatternError: Error, CustomStringConvertible {
    package let description: String
}

package struct MessagePattern: Sendable, CustomStringConvertible {
    private enum Kind: Sendable { case regex(String), json(key: String, value: String) }
    private let kind: Kind
    package var description: String {
        switch kind {
        case .regex(let s): return s
        case .json(let k, let v): return "\(k)=\(v)"
        }
    }

    package static func regex(_ source: String) throws(MessagePatternError) -> MessagePattern {
        if source.contains("\\1") { throw MessagePatternError(description: "back-reference \\1 is not supported") }
        var re = regex_t()
        let rc = regcomp(&re, source, REG_EXTENDED | REG_NOSUB)
        if rc != 0 { throw MessagePatternError(description: "invalid regular expression (\(rc))") }
        regfree(&re)
        return MessagePattern(kind: .regex(source))
    }

    package static func jsonField(_ spec: String) throws(MessagePatternError) -> MessagePattern {
        guard let eq = spec.firstIndex(of: "="), eq != spec.startIndex else {
            throw MessagePatternError(description: "'\(spec)' is not PATH=VALUE")
        }
        let key = String(spec[..<eq])
        if key.hasPrefix(".") || key.hasSuffix(".") || key.contains("..") {
            throw MessagePatternError(description: "path '\(key)' has an empty key")
        }
        return MessagePattern(kind: .json(key: key, value: String(spec[spec.index(after: eq)...])))
    }

    package func matches(text payload: UnsafeRawBufferPointer) -> Bool {
        matches(text: Array(payload.prefix(1 << 20)))
    }

    package func matches(text payload: [UInt8]) -> Bool {
        let bytes = Array(payload.prefix(1 << 20))
        switch kind {
        case .regex(let source):
            var re = regex_t()
            guard regcomp(&re, source, REG_EXTENDED | REG_NOSUB) == 0 else { return false }
            defer { regfree(&re) }
            var text = bytes.map { CChar(bitPattern: $0) }
            text.append(0)
            var match = regmatch_t()
            match.rm_so = 0
            match.rm_eo = regoff_t(bytes.count)
            return regexec(&re, text, 1, &match, 4 /* REG_STARTEND */) == 0
        case .json(let key, let value):
            guard let parsed = try? bytes.withUnsafeBytes({ (b: UnsafeRawBufferPointer) throws(JSONError) in try JSONParser.parse(b) }),
                  let field = parsed[key] else { return false }
            let want = (try? Array(value.utf8).withUnsafeBytes({ (b: UnsafeRawBufferPointer) throws(JSONError) in try JSONParser.parse(b) }))
                ?? .string(value)
            return field == want
        }
    }
}
