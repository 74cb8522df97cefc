// Package benchsite makes the synthetic documentation sites the viewer's
// benchmarks measure: deterministic Markdown pages of a given size, written
// like operator documentation — English prose with inline markup, Go and
// YAML code, tables, lists, and a Japanese and a Chinese paragraph — so
// rendering, highlighting and search (Latin and CJK) all have real work.
package benchsite

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Queries are searches with hits in every generated site: a common word,
// a two-word phrase, a Japanese and a Chinese word.
var Queries = []string{"reconcile", "status conditions", "ページ", "配置文件"}

var words = strings.Fields(`the a of to and in is for that with on as by it this be are from or
operator controller reconcile reconciler status condition conditions resource resources cluster
namespace namespaces deployment service configmap secret viewer markdown page pages site search index
cache informer watch event events label labels annotation owner reference finalizer spec field fields
replica replicas rollout ready available progressing degraded stalled generation observed version
request requests latency metrics manager leader election lease queue rate limiter backoff retry error
apply server side patch update create delete object objects kind group api schema validation webhook
bucket storage tenant team admin role binding permission policy network ingress route gateway host tls
image container pod node scheduler volume mount file files directory render rendered html heading
anchor contents table code block highlight style dark light print asset assets svg png limit size`)

var japanese = []string{
	"このページではオペレーターの設定方法を説明します。",
	"コントローラーはリソースの状態を監視し、望ましい状態に近づけます。",
	"一ページ目のコンテンツです。",
	"検索ボックスに単語を入力すると、サイト全体から該当するページが見つかります。",
	"ビューアはマークダウンを安全にレンダリングし、スクリプトは一切実行されません。",
	"設定ファイルを変更すると、数秒以内にページに反映されます。",
	"ダークモードではコードの配色も自動的に切り替わります。",
	"画像はコンフィグマップのバイナリデータとして保存されます。",
}

var chinese = []string{
	"本页介绍如何安装和配置操作员。",
	"控制器会持续监视资源的状态并进行调和。",
	"修改配置文件后，页面会在几秒钟内更新。",
	"使用搜索引擎可以快速找到相关的文档页面。",
	"查看器不会执行任何脚本，因此渲染结果是安全的。",
	"图片作为二进制数据保存在配置映射中。",
}

// Site returns pages Markdown files of about pageBytes each, page-000.md …,
// and a SUMMARY.md that lists them. The same arguments give the same site.
func Site(pages, pageBytes int) map[string]string {
	files := map[string]string{}
	var summary strings.Builder
	summary.WriteString("# Summary\n\n")
	for i := range pages {
		name := fmt.Sprintf("page-%03d.md", i)
		title := fmt.Sprintf("Chapter %d: %s", i, titleOf(i))
		fmt.Fprintf(&summary, "- [%s](%s)\n", title, name)
		files[name] = Page(i, title, pageBytes)
	}
	files["SUMMARY.md"] = summary.String()
	return files
}

func titleOf(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	return words[r.IntN(len(words))] + " " + words[r.IntN(len(words))]
}

// Page returns one page of at least size bytes (a little more: the last
// section is finished).
func Page(seed int, title string, size int) string {
	return page(seed, title, size, func(n int) string { return fmt.Sprintf("page-%03d.md#status", n) })
}

// page is Page with its links to other pages made by link, from a number
// below 128.
func page(seed int, title string, size int, link func(int) string) string {
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", title)
	for s := 0; b.Len() < size; s++ {
		fmt.Fprintf(&b, "## %s %d\n\n", sentence(r, 3), s)
		for range 2 {
			b.WriteString(paragraph(r, link))
		}
		switch s % 4 {
		case 0:
			fmt.Fprintf(&b, "```go\nfunc (r *Reconciler) step%d(ctx context.Context, obj *v1.Object) (ctrl.Result, error) {\n"+
				"\t// %s\n\tif err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {\n"+
				"\t\treturn ctrl.Result{}, client.IgnoreNotFound(err)\n\t}\n\treturn ctrl.Result{RequeueAfter: %d * time.Second}, nil\n}\n```\n\n",
				s, sentence(r, 8), r.IntN(60))
		case 1:
			b.WriteString(japanese[r.IntN(len(japanese))] + japanese[r.IntN(len(japanese))] + "\n\n")
			b.WriteString(chinese[r.IntN(len(chinese))] + chinese[r.IntN(len(chinese))] + "\n\n")
		case 2:
			b.WriteString("| field | type | default | meaning |\n|---|---|---|---|\n")
			for range 4 {
				fmt.Fprintf(&b, "| `%s` | string | `%d` | %s |\n", words[r.IntN(len(words))], r.IntN(100), sentence(r, 6))
			}
			b.WriteString("\n")
		case 3:
			fmt.Fprintf(&b, "```yaml\napiVersion: view.trellis.dev/v1\nkind: MarkdownView\nmetadata:\n  name: %s\nspec:\n  replicas: %d\n```\n\n",
				words[r.IntN(len(words))], r.IntN(5)+1)
			fmt.Fprintf(&b, "- %s\n- %s\n- [ ] %s\n\n", sentence(r, 5), sentence(r, 7), sentence(r, 4))
		}
	}
	return b.String()
}

func paragraph(r *rand.Rand, link func(int) string) string {
	var b strings.Builder
	for i := range 4 {
		s := sentence(r, 8+r.IntN(10))
		switch i {
		case 1:
			s += fmt.Sprintf(" See [the reference](%s) and `spec.%s`.", link(r.IntN(128)), words[r.IntN(len(words))])
		case 2:
			s = "**" + s + "**"
		}
		b.WriteString(s + " ")
	}
	return strings.TrimSpace(b.String()) + "\n\n"
}

func sentence(r *rand.Rand, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = words[r.IntN(len(words))]
	}
	ws[0] = strings.ToUpper(ws[0][:1]) + ws[0][1:]
	return strings.Join(ws, " ") + "."
}
