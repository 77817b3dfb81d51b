#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation

/// The controlling terminal: raw keystrokes and a full-screen redraw. Used
/// only when standard input and output are a terminal.
final class Terminal {
    private var saved = termios()
    private(set) var isRaw = false

    static var isInteractive: Bool { isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1 }

    /// Rows and columns; 24×80 when the terminal does not say.
    var size: (rows: Int, columns: Int) {
        var window = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &window) == 0, window.ws_row > 0, window.ws_col > 0 {
            return (Int(window.ws_row), Int(window.ws_col))
        }
        return (24, 80)
    }

    /// Keystrokes one by one, without echo (the screen shows the input line itself).
    func enableRawMode() {
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { return }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG | IEXTEN)
        raw.c_iflag &= ~tcflag_t(IXON | ICRNL)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw)
        isRaw = true
        write("\u{1B}[?1049h")  // the alternate screen, so the shell's scrollback is left alone
    }

    func restore() {
        guard isRaw else { return }
        write("\u{1B}[?1049l")
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
        isRaw = false
    }

    func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Draws the whole screen: a header, the newest messages that fit, the info
    /// lines, and the input line with the cursor at its end.
    func draw(header: String, messages: [String], info: [String], input: String) {
        let (rows, columns) = size
        let infoRows = min(info.count, max(rows - 4, 0))
        let messageRows = max(rows - 2 - infoRows, 0)
        var screen = "\u{1B}[H\u{1B}[2J"
        screen += clip(header, columns) + "\r\n"
        let shown = messages.suffix(messageRows)
        for _ in 0..<(messageRows - shown.count) { screen += "\r\n" }
        for line in shown { screen += clip(line, columns) + "\r\n" }
        for line in info.suffix(infoRows) { screen += clip(line, columns) + "\r\n" }
        screen += clip("> " + input, columns)
        write(screen)
    }

    /// Cuts a line to the screen width, counting characters but not ANSI colour codes.
    private func clip(_ line: String, _ columns: Int) -> String {
        var visible = 0
        var result = ""
        var inEscape = false
        for character in line {
            if character == "\u{1B}" { inEscape = true }
            if inEscape {
                result.append(character)
                if character == "m" { inEscape = false }
                continue
            }
            guard visible < columns else { continue }
            result.append(character)
            visible += 1
        }
        return result
    }
}
