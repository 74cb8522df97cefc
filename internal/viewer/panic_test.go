package viewer

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// panicsOnHeadings renders every heading by panicking, as a bug in one of
// our extensions might.
type panicsOnHeadings struct{}

func (panicsOnHeadings) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindHeading, func(util.BufWriter, []byte, ast.Node, bool) (ast.WalkStatus, error) {
		panic("a renderer's bug")
	})
}

// TestARendererPanicIsThatPagesError: a panic while a page renders fails
// that page (500, and no search finds it), not the viewer. The warm-up,
// which renders every page outside any request, finishes, and the other
// pages are served.
func TestARendererPanicIsThatPagesError(t *testing.T) {
	g := NewWithT(t)
	saved := markdown.Load()
	markdown.Store(goldmark.New(goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(panicsOnHeadings{}, 0)))))
	t.Cleanup(func() { markdown.Store(saved) })

	s, _ := newTestServer(map[string]string{"index.md": "plain text\n", "boom.md": "# boom\n\nkaboom\n"})
	g.Expect(do(s, http.MethodGet, "/index.md").Code).To(Equal(http.StatusOK))
	st := s.current.Load()
	g.Expect(st).NotTo(BeNil())
	g.Eventually(st.indexReady).WithTimeout(10*time.Second).Should(BeClosed(), "the warm-up renders both pages and builds the index")
	g.Expect(do(s, http.MethodGet, "/boom.md").Code).To(Equal(http.StatusInternalServerError))
	g.Expect(do(s, http.MethodGet, "/boom.md").Code).To(Equal(http.StatusInternalServerError), "and again: not served empty")
	g.Expect(do(s, http.MethodGet, "/index.md").Code).To(Equal(http.StatusOK))
	found := do(s, http.MethodGet, "/search?q=kaboom")
	g.Expect(found.Code).To(Equal(http.StatusOK))
	g.Expect(found.Body.String()).To(ContainSubstring("0 sections match"))
	g.Expect(do(s, http.MethodGet, "/search?q=plain").Body.String()).NotTo(ContainSubstring("0 sections match"), "the search works")
}
