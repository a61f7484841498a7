/// What --expect / --until (a regular expression) and --expect-json / --until-json
/// (PATH=VALUE) look for in a received text message. Made once from the command line, then
/// tried on every text message while a step waits; never on binary messages (the caller's
/// rule). Only the first `examinedBytes` of a payload are looked at, so a huge message costs
/// no more than a 1 MiB one: a match further on is not seen, and a JSON message longer than
/// that never matches (its first 1 MiB is not a whole JSON text).
package struct MessagePattern: Sendable, CustomStringConvertible {
    private enum Form: Sendable {
        case regex(RegexPattern)
        case jsonField(JSONFieldPattern)
    }

    private let form: Form
    /// As the user wrote it, for one-line messages.
    package let description: String

    /// 1 MiB: what is examined of a payload.
    package static let examinedBytes = 1 << 20

    /// A POSIX extended regular expression, searched (not anchored) in the payload.
    package static func regex(_ source: String) throws(MessagePatternError) -> MessagePattern {
        MessagePattern(form: .regex(try RegexPattern(source)), description: source)
    }

    /// PATH=VALUE: the JSON field at PATH equals VALUE (JSON's meaning of equal).
    package static func jsonField(_ spec: String) throws(MessagePatternError) -> MessagePattern {
        MessagePattern(form: .jsonField(try JSONFieldPattern(spec)), description: spec)
    }

    /// Whether a text message's payload (UTF-8, as received) matches.
    package func matches(text payload: UnsafeRawBufferPointer) -> Bool {
        let examined = MessagePattern.examined(payload)
        switch form {
        case .regex(let regex): return regex.matches(examined)
        case .jsonField(let field): return field.matches(examined)
        }
    }

    package func matches(text payload: [UInt8]) -> Bool {
        payload.withUnsafeBytes { matches(text: $0) }
    }

    /// The first `examinedBytes` of `payload`, cut before a UTF-8 sequence that would not fit.
    static func examined(_ payload: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        guard payload.count > examinedBytes else { return payload }
        var end = examinedBytes
        // Back to the lead byte of the sequence the cut falls in (continuations are 10xxxxxx).
        while end > 0 && payload[end] & 0xC0 == 0x80 { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: payload[..<end])
    }
}

/// A pattern refused when the command line is read: one line naming the option, the pattern
/// and the fault.
package struct MessagePatternError: Error, Equatable, CustomStringConvertible {
    /// The option the pattern came with: the flag-neutral default is set by the factory
    /// (--expect or --expect-json); `given(as:)` names another (--until, --until-json).
    package var option: String
    package let pattern: String
    package let fault: String

    package var description: String { "\(option) '\(pattern)': \(fault)" }

    /// The same error for a pattern given with `option`.
    package func given(as option: String) -> MessagePatternError {
        var renamed = self
        renamed.option = option
        return renamed
    }
}
