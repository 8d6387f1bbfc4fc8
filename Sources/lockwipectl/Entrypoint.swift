import LockwipeCTL
import LockwipeProtocol

@main
struct Entrypoint {
    static func main() {
        LockwipeCTL.mainWithExitCodes(ProcessArguments.current())
    }
}
