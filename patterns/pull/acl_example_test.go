package pull_test

import (
	"fmt"
	"log"

	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// An ACL file lets CURVE keys and PLAIN users read streams by pattern;
// ServerConfig.ACL (or Server.SetACL) enforces it.
func ExampleParseACL() {
	acl, err := pull.ParseACL([]byte(`fastmq-acl 1
# collectors read every log stream, ops reads the metrics
allow rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7 logs-*
allow user:ops metrics-* logs-web
`))
	if err != nil {
		log.Fatal(err)
	}
	ops := socket.PeerCredentials{Mechanism: "PLAIN", Username: "ops"}
	fmt.Println(acl.Allows(ops, "metrics-cpu"), acl.Allows(ops, "logs-db"))
	// Output: true false
}
