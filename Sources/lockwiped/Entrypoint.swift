import LockwipeDaemon

@main
struct Entrypoint {
    static func main() async {
        await LockwipedCommand.main()
    }
}
