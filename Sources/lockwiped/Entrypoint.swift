import LockwipeProtocol

@main
struct Entrypoint {
    static func main() async {
        await LockwipedCommand.main(ProcessArguments.current())
    }
}
