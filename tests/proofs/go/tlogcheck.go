// tlogcheck checks braidlog's checkpoints, tlog-proof files, consistency proofs and tlog-tiles
// with Go's own golang.org/x/mod/sumdb/tlog and note packages, and nothing of braidlog's.
//
//	tlogcheck checkpoint VKEY NOTE
//	tlogcheck tlogproof VKEY PROOF ENTRY
//	tlogcheck consistency VKEY OLDNOTE NEWNOTE PROOF.json
//	tlogcheck tiles VKEY DIR|URL [OLDNOTE]
//
// It prints "ok ..." and exits 0, or prints what failed and exits 1.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func fail(format string, args ...interface{}) {
	fmt.Printf("FAIL "+format+"\n", args...)
	os.Exit(1)
}

func read(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	return data
}

// checkpoint opens a signed note with the verifier key and parses it as a C2SP tlog-checkpoint.
func checkpoint(vkey string, msg []byte) (origin string, size int64, root tlog.Hash) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		fail("verifier key: %v", err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		fail("note: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 || lines[len(lines)-1] != "" {
		fail("checkpoint text has %d lines", len(lines))
	}
	if lines[0] != v.Name() {
		fail("checkpoint origin %q is not the key's %q", lines[0], v.Name())
	}
	size, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		fail("checkpoint size %q", lines[1])
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		fail("checkpoint root %q", lines[2])
	}
	copy(root[:], raw)
	return lines[0], size, root
}

func hashesOf(lines []string) []tlog.Hash {
	var out []tlog.Hash
	for _, l := range lines {
		raw, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(raw) != tlog.HashSize {
			fail("proof hash %q", l)
		}
		var h tlog.Hash
		copy(h[:], raw)
		out = append(out, h)
	}
	return out
}

func tlogProof(vkey string, proof, entry []byte) {
	text := string(proof)
	i := strings.Index(text, "\n\n")
	if i < 0 {
		fail("no blank line in the tlog-proof")
	}
	lines := strings.Split(text[:i], "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" {
		fail("header %q", lines[0])
	}
	at := 1
	if strings.HasPrefix(lines[at], "extra ") {
		at++
	}
	if !strings.HasPrefix(lines[at], "index ") {
		fail("no index line")
	}
	index, err := strconv.ParseInt(strings.TrimPrefix(lines[at], "index "), 10, 64)
	if err != nil {
		fail("index: %v", err)
	}
	_, size, root := checkpoint(vkey, []byte(text[i+2:]))
	p := tlog.RecordProof(hashesOf(lines[at+1:]))
	if err := tlog.CheckRecord(p, size, root, index, tlog.RecordHash(entry)); err != nil {
		fail("inclusion of entry %d in the tree of %d: %v", index, size, err)
	}
	fmt.Printf("ok entry %d in tree %d\n", index, size)
}

func consistency(vkey string, oldNote, newNote, proofJSON []byte) {
	_, oldSize, oldRoot := checkpoint(vkey, oldNote)
	_, newSize, newRoot := checkpoint(vkey, newNote)
	var p struct {
		OldSize  int64    `json:"old_size"`
		TreeSize int64    `json:"tree_size"`
		Path     []string `json:"path"`
	}
	if err := json.Unmarshal(proofJSON, &p); err != nil {
		fail("proof JSON: %v", err)
	}
	if p.OldSize != oldSize || p.TreeSize != newSize {
		fail("proof sizes %d..%d, checkpoints %d..%d", p.OldSize, p.TreeSize, oldSize, newSize)
	}
	var tp tlog.TreeProof
	for _, h := range p.Path {
		raw, err := hex.DecodeString(h)
		if err != nil || len(raw) != tlog.HashSize {
			fail("path hash %q", h)
		}
		var x tlog.Hash
		copy(x[:], raw)
		tp = append(tp, x)
	}
	if err := tlog.CheckTree(tp, newSize, newRoot, oldSize, oldRoot); err != nil {
		fail("consistency %d..%d: %v", oldSize, newSize, err)
	}
	fmt.Printf("ok tree %d extends tree %d\n", newSize, oldSize)
}

// tiles reads a C2SP tlog-tiles directory or URL: tile/<L>/<N>[.p/<W>], tile/entries/<N>[.p/<W>].
type tiles struct{ base string }

func (t tiles) get(path string) ([]byte, error) {
	if strings.HasPrefix(t.base, "http://") {
		resp, err := http.Get(strings.TrimSuffix(t.base, "/") + "/" + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	return os.ReadFile(filepath.Join(t.base, filepath.FromSlash(path)))
}

func c2spPath(t tlog.Tile) string { return "tile/" + strings.TrimPrefix(t.Path(), "tile/8/") }

func (t tiles) Height() int { return 8 }
func (t tiles) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	var out [][]byte
	for _, x := range ts {
		data, err := t.get(c2spPath(x))
		if err != nil {
			return nil, err
		}
		out = append(out, data)
	}
	return out, nil
}
func (t tiles) SaveTiles([]tlog.Tile, [][]byte) {}

func checkTiles(vkey, base string, oldNote []byte) {
	src := tiles{base}
	msg, err := src.get("checkpoint")
	if err != nil {
		fail("checkpoint: %v", err)
	}
	_, size, root := checkpoint(vkey, msg)
	tree := tlog.Tree{N: size, Hash: root}
	r := tlog.TileHashReader(tree, src)
	got, err := tlog.TreeHash(size, r)
	if err != nil || got != root {
		fail("tree hash from the tiles: %v (%v, checkpoint %v)", err, got, root)
	}
	// every entry bundle: each entry hashes to its level-0 hash, proved by an inclusion proof
	for n := int64(0); n*256 < size; n++ {
		w := size - n*256
		if w > 256 {
			w = 256
		}
		path := c2spPath(tlog.Tile{H: 8, L: 0, N: n, W: int(w)})
		path = "tile/entries/" + strings.TrimPrefix(path, "tile/0/")
		data, err := src.get(path)
		if err != nil {
			fail("bundle %d: %v", n, err)
		}
		for i := int64(0); i < w; i++ {
			if len(data) < 2 {
				fail("bundle %d ends before entry %d", n, i)
			}
			l := int(data[0])<<8 | int(data[1])
			if len(data) < 2+l {
				fail("bundle %d: entry %d is cut short", n, i)
			}
			entry := data[2 : 2+l]
			data = data[2+l:]
			index := n*256 + i
			p, err := tlog.ProveRecord(size, index, r)
			if err != nil {
				fail("proof of entry %d: %v", index, err)
			}
			if err := tlog.CheckRecord(p, size, root, index, tlog.RecordHash(entry)); err != nil {
				fail("entry %d of bundle %d: %v", index, n, err)
			}
		}
		if len(data) != 0 {
			fail("bundle %d has %d bytes after its %d entries", n, len(data), w)
		}
	}
	if oldNote != nil {
		_, oldSize, oldRoot := checkpoint(vkey, oldNote)
		p, err := tlog.ProveTree(size, oldSize, r)
		if err != nil {
			fail("consistency proof from the tiles: %v", err)
		}
		if err := tlog.CheckTree(p, size, root, oldSize, oldRoot); err != nil {
			fail("tree %d does not extend tree %d: %v", size, oldSize, err)
		}
	}
	fmt.Printf("ok tiles of tree %d\n", size)
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: tlogcheck MODE VKEY ...")
	}
	vkey := string(bytes.TrimSpace(read(os.Args[2])))
	switch args := os.Args[3:]; os.Args[1] {
	case "checkpoint":
		_, size, root := checkpoint(vkey, read(args[0]))
		fmt.Printf("ok checkpoint %d %s\n", size, hex.EncodeToString(root[:]))
	case "tlogproof":
		tlogProof(vkey, read(args[0]), read(args[1]))
	case "consistency":
		consistency(vkey, read(args[0]), read(args[1]), read(args[2]))
	case "tiles":
		var old []byte
		if len(args) > 1 {
			old = read(args[1])
		}
		checkTiles(vkey, args[0], old)
	default:
		fail("unknown mode %q", os.Args[1])
	}
}
