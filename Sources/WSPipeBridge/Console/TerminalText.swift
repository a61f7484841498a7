/// Text as it may reach a terminal: characters that would act instead of show are written
/// as visible escapes. C0 controls but TAB, DEL and C1 as `\xHH` (so no escape sequence
/// moves the cursor, sets the title or writes the clipboard); bidi embeddings, overrides
/// and isolates (U+202A-202E, U+2066-2069) as `\u{HHHH}` (so no text reorders what
/// follows it on the line). `Diagnostics.terminalSafe` and the console's line editor both
/// use it.
package enum TerminalText {
    /// Whether `scalar` is shown as an escape rather than as itself. `keepingTab`: a TAB
    /// passes (a diagnostic line may have one; the line editor counts cells and shows it).
    package static func isEscaped(_ scalar: Unicode.Scalar, keepingTab: Bool = true) -> Bool {
        switch scalar.value {
        case 0x09: return !keepingTab
        case 0..<0x20, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    /// The visible form of an escaped scalar: `\x1B`, `\u{202E}`.
    package static func escape(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        if scalar.value > 0xFF { return "\\u{\(hex)}" }
        return "\\x" + (scalar.value < 0x10 ? "0" : "") + hex
    }

    /// `text` with every escaped scalar (TAB kept) in its visible form.
    package static func safe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { isEscaped($0) }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if isEscaped(scalar) { out += escape(scalar) } else { out.unicodeScalars.append(scalar) }
        }
        return out
    }
}
