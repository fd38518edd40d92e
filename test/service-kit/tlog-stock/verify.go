// A stock verifier for the services' logs: Go's golang.org/x/mod/sumdb/note and sumdb/tlog (the
// Go checksum database's code, which C2SP tlog-tiles and tlog-checkpoint come from) follow a log
// at a base URL with only its vkey. It opens the checkpoint, reads every tile through
// tlog.TileHashReader (which checks each tile against the signed root), proves and checks every
// entry's inclusion from the entry bundles, and checks the served JSON proofs and a consistency
// proof from an older size. Prints "ok <size>" or fails.
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go run verify.go <base URL> <vkey> <older size>
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func get(url string) []byte {
	res, err := http.Get(url)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		panic(fmt.Sprintf("%s: %d %s", url, res.StatusCode, b))
	}
	return b
}

func index(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

type tiles struct{ base string }

func (t tiles) Height() int { return 8 }
func (t tiles) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, x := range ts {
		p := fmt.Sprintf("%s/log/tile/%d/%s", t.base, x.L, index(x.N))
		if x.W < 256 {
			p += fmt.Sprintf(".p/%d", x.W)
		}
		out[i] = get(p)
	}
	return out, nil
}
func (t tiles) SaveTiles([]tlog.Tile, [][]byte) {}

func main() {
	base, vkey := os.Args[1], os.Args[2]
	older, _ := strconv.ParseInt(os.Args[3], 10, 64)
	v, err := note.NewVerifier(vkey)
	if err != nil {
		panic(err)
	}
	n, err := note.Open(get(base+"/log/checkpoint"), note.VerifierList(v))
	if err != nil {
		panic(err)
	}
	// A tlog-checkpoint body: origin, size, root (tlog.ParseTree wants sumdb's own first line).
	lines := strings.Split(n.Text, "\n")
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		panic(err)
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		panic(err)
	}
	tree := tlog.Tree{N: size, Hash: root}
	r := tlog.TileHashReader(tree, tiles{base})
	if h, err := tlog.TreeHash(tree.N, r); err != nil || h != tree.Hash {
		panic(fmt.Sprintf("tree hash: %v", err))
	}
	for b := int64(0); b*256 < tree.N; b++ {
		w := tree.N - b*256
		p := fmt.Sprintf("%s/log/tile/entries/%s", base, index(b))
		if w < 256 {
			p += fmt.Sprintf(".p/%d", w)
		} else {
			w = 256
		}
		bundle := get(p)
		for i := int64(0); i < w; i++ {
			l := int(binary.BigEndian.Uint16(bundle))
			entry := bundle[2 : 2+l]
			bundle = bundle[2+l:]
			id := b*256 + i
			proof, err := tlog.ProveRecord(tree.N, id, r)
			if err != nil {
				panic(err)
			}
			if err := tlog.CheckRecord(proof, tree.N, tree.Hash, id, tlog.RecordHash(entry)); err != nil {
				panic(fmt.Sprintf("entry %d: %v", id, err))
			}
			var served struct {
				Hashes []string `json:"hashes"`
				Entry  string   `json:"entry"`
			}
			json.Unmarshal(get(fmt.Sprintf("%s/log/proof/inclusion?index=%d&size=%d", base, id, tree.N)), &served)
			if served.Entry != string(entry) || len(served.Hashes) != len(proof) {
				panic(fmt.Sprintf("entry %d: the served proof differs", id))
			}
			for k, h := range served.Hashes {
				if base64.StdEncoding.EncodeToString(proof[k][:]) != h {
					panic(fmt.Sprintf("entry %d: served hash %d differs", id, k))
				}
			}
		}
	}
	oldHash, err := tlog.TreeHash(older, r)
	if err != nil {
		panic(err)
	}
	var cons struct {
		Hashes []string `json:"hashes"`
	}
	json.Unmarshal(get(fmt.Sprintf("%s/log/proof/consistency?from=%d&to=%d", base, older, tree.N)), &cons)
	var tp tlog.TreeProof
	for _, h := range cons.Hashes {
		b, _ := base64.StdEncoding.DecodeString(h)
		var x tlog.Hash
		copy(x[:], b)
		tp = append(tp, x)
	}
	if err := tlog.CheckTree(tp, tree.N, tree.Hash, older, oldHash); err != nil {
		panic(fmt.Sprintf("consistency %d → %d: %v", older, tree.N, err))
	}
	fmt.Printf("ok %d\n", tree.N)
}
