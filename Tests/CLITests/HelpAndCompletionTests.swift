import Foundation
import Glibc
import Testing
import N11TestSupport

// Help, completions and the man page are generated from the command definitions; these tests
// walk every command that `--experimental-dump-help` lists (so a command added later is
// covered without touching this file) and check that each one is in every generated form.

/// One command of the tree: its path below the root ([] for the root) and abstract.
struct CommandEntry: CustomStringConvertible {
    let path: [String]
    let abstract: String
    var discussion: String = ""
    var description: String { (["n11archive"] + path).joined(separator: " ") }
}

/// Every command of the binary's tree, root first, without the built-in `help`.
func commandTree() throws -> [CommandEntry] {
    let result = try withSandbox { try $0.run(["--experimental-dump-help"]) }
    guard result.status == 0,
          let json = try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any],
          let root = json["command"] as? [String: Any] else {
        throw RunnerError(description: "--experimental-dump-help gave no command tree: \(result)")
    }
    var entries: [CommandEntry] = []
    func walk(_ command: [String: Any], _ path: [String]) {
        entries.append(CommandEntry(path: path, abstract: command["abstract"] as? String ?? "",
                                    discussion: command["discussion"] as? String ?? ""))
        for sub in command["subcommands"] as? [[String: Any]] ?? [] {
            guard let name = sub["commandName"] as? String, name != "help" else { continue }
            walk(sub, path + [name])
        }
    }
    walk(root, [])
    return entries
}

/// The generate-manual tool that swift-argument-parser's plugin builds next to the binary
/// (Scripts/completions-and-man builds it; Scripts/test runs that before the tests).
let generateManualTool: String = {
    if let path = ProcessInfo.processInfo.environment["N11_GENERATE_MANUAL"], !path.isEmpty { return path }
    return URL(fileURLWithPath: n11archiveBinary).deletingLastPathComponent().appendingPathComponent("generate-manual-tool").path
}()

/// Runs `tool arguments` with no input and output, returning its exit status. A plain
/// function, not a closure: closures capturing Process crash this compiler.
func runTool(_ tool: String, _ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

@Suite("n11archive CLI: help, completions and man page")
struct HelpAndCompletionTests {
    @Test("the command tree holds every command, the password and vault groups included")
    func tree() throws {
        let names = Set(try commandTree().map(\.description))
        for expected in ["n11archive", "n11archive init", "n11archive vault", "n11archive vault add", "n11archive vault rm",
                         "n11archive create", "n11archive restore", "n11archive password", "n11archive password generate"] {
            #expect(names.contains(expected), "\(expected) is missing from --experimental-dump-help")
        }
    }

    @Test("--help on every command shows an example of that command")
    func everyHelpHasAnExample() throws {
        try withSandbox { s in
            for command in try commandTree() {
                let help = try s.run(command.path + ["--help"])
                expectExit(help, 0)
                let example = "n11archive" + command.path.map { " " + $0 }.joined() + " "
                let lines = help.out.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                #expect(lines.contains { ($0 + " ").hasPrefix(example) }, "no example line starting with '\(example)' in `\(command) --help`:\n\(help.out)")
            }
        }
    }

    @Test("help text reads cleanly at 80 columns: examples fit on a line, prose is not hard-wrapped")
    func helpWrapsCleanly() throws {
        for command in try commandTree() {
            let lines = command.discussion.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for (i, line) in lines.enumerated() {
                if line.hasPrefix("  ") {
                    // An example (indented): the help's 80 columns must hold it whole.
                    #expect(line.count <= 78, "`\(command) --help`: example longer than 78 characters: \(line)")
                } else if let last = line.last, i + 1 < lines.count, let next = lines[i + 1].first, next != " ",
                          !".:)".contains(last) {
                    // Prose broken mid-sentence in the source: the parser wraps each source
                    // line on its own, so the help shows ragged half-lines.
                    Issue.record("`\(command) --help`: prose hard-wrapped after \"\(line)\"")
                }
            }
        }
    }

    @Test("the bash, zsh and fish completions cover every command")
    func completions() throws {
        let commands = try commandTree().filter { !$0.path.isEmpty }
        try withSandbox { s in
            var scripts: [String: String] = [:]
            for shell in ["bash", "zsh", "fish"] {
                let result = try s.run(["--generate-completion-script", shell])
                expectExit(result, 0)
                scripts[shell] = result.out
            }
            #expect(scripts["zsh"]?.hasPrefix("#compdef n11archive") == true)
            for command in commands {
                // bash and zsh dispatch to one function per command; fish offers each name
                // after its parent's words.
                let function = "_" + (["n11archive"] + command.path).joined(separator: "_") + "() {"
                #expect(scripts["bash"]?.contains(function) == true, "bash: \(command)")
                #expect(scripts["zsh"]?.contains(function) == true, "zsh: \(command)")
                let parent = (["n11archive"] + command.path.dropLast()).joined(separator: " ")
                #expect(scripts["fish"]?.contains("\"\(parent)\" -eq 1' -fa '\(command.path.last!)'") == true, "fish: \(command)")
            }
        }
    }

    @Test("every FILE or DIR argument completes paths (so completion never breaks file completion), and bash offers them")
    func pathCompletions() throws {
        try withSandbox { s in
            let dump = try s.run(["--experimental-dump-help"])
            let root = try #require((try JSONSerialization.jsonObject(with: Data(dump.stdout)) as? [String: Any])?["command"] as? [String: Any])
            var checked = 0
            func walk(_ command: [String: Any], _ path: [String]) {
                for argument in command["arguments"] as? [[String: Any]] ?? [] {
                    guard let value = argument["valueName"] as? String, value == "FILE" || value == "DIR" else { continue }
                    let kind = (argument["completionKind"] as? [String: Any])?.keys.first
                    #expect(kind == (value == "FILE" ? "file" : "directory"), "\(path.joined(separator: " ")) \(value): \(String(describing: kind))")
                    checked += 1
                }
                for sub in command["subcommands"] as? [[String: Any]] ?? [] {
                    walk(sub, path + [sub["commandName"] as? String ?? "?"])
                }
            }
            walk(root, [])
            #expect(checked > 50, "only \(checked) path arguments found")
            let bash = try s.run(["--generate-completion-script", "bash"]).out
            let restore = try #require(bash.range(of: "_n11archive_restore() {")).upperBound
            let end = try #require(bash.range(of: "\n}\n", range: restore..<bash.endIndex)).lowerBound
            let body = String(bash[restore..<end])
            #expect(body.contains("'--export')\n        __n11archive_add_completions -d"), "\(body)")
            #expect(body.contains("1)\n        __n11archive_add_completions -f"), "the archive argument completes files: \(body)")
        }
    }

    @Test("the man page from swift-argument-parser's generate-manual names every command with its abstract",
          .enabled(if: FileManager.default.isExecutableFile(atPath: generateManualTool),
                   "generate-manual-tool is not built next to the binary: run Scripts/completions-and-man (Scripts/test does) or set N11_GENERATE_MANUAL"))
    func manPage() throws {
        let commands = try commandTree()
        try withSandbox { s in
            let out = s.path("man")
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
            #expect(try runTool(generateManualTool, [n11archiveBinary, "--output-directory", out]) == 0)
            let page = String(decoding: try readBytes(out + "/n11archive.1"), as: UTF8.self)
            #expect(page.contains(".Nm n11archive"))
            for command in commands where !command.path.isEmpty {
                // A command with aliases is listed as `.It Em "key, keys"`.
                let name = command.path.last!
                #expect(page.contains(".It Em \(name)\n") || page.contains(".It Em \"\(name), "), "the man page lacks \(command)")
                #expect(page.contains(command.abstract), "the man page lacks the abstract of \(command)")
            }
        }
    }
}
