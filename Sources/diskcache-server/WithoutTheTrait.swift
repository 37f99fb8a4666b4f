#if !Server
import Foundation

/// `diskcache-server` built without the package's `Server` trait: its module is empty (so that
/// packages depending on this one for a library never resolve SwiftNIO and the rest), and this
/// says how to build it.
@main
enum ServerWithoutTheTrait {
    static func main() {
        let message = """
        diskcache-server: built without the package's Server trait, so there is no server in it. Build it with
          swift build -c release --product diskcache-server --traits Server

        """
        FileHandle.standardError.write(Data(message.utf8))
        exit(2)
    }
}
#endif
