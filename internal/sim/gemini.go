package sim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// The Gemini API (generativelanguage.googleapis.com), as the simulator
// speaks it. The shapes follow what Gemini really sends (the recorded
// gemini-2.5-flash streams in testdata/gemini, and the @google/genai
// SDK's types):
// camelCase members; a streamed chunk is a whole GenerateContentResponse
// whose usageMetadata is cumulative; thoughts are text parts with
// "thought": true, sent only when the request's
// generationConfig.thinkingConfig.includeThoughts is true; a
// thoughtSignature rides on the first part after the thoughts (the text
// or the function call), as Gemini 2.5 and 3 send it and require back in
// later turns; a function call comes whole in one part, never in
// pieces; errors are {"error":{"code","message","status","details"}}.

// Gemini methods, the part of the path after "models/{model}:".
const (
	geminiGenerate = "generateContent"
	geminiStream   = "streamGenerateContent"
	geminiCount    = "countTokens"
)

// Gemini finish reasons.
const (
	geminiStop      = "STOP"
	geminiMaxTokens = "MAX_TOKENS"
)

// geminiRequest is the part of a generateContent request the simulator
// reads. temperature, safetySettings and the rest are accepted and
// ignored.
type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig *struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig *struct {
		MaxOutputTokens *int `json:"maxOutputTokens"`
		ThinkingConfig  *struct {
			IncludeThoughts bool `json:"includeThoughts"`
			ThinkingBudget  *int `json:"thinkingBudget"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
	// CachedContent names a cache (cachedContents/...); the simulator
	// then reports part of the prompt as read from it.
	CachedContent string `json:"cachedContent"`

	autoTools bool // the tool-call mode is ToolCallsAuto
}

// geminiContent is one turn: role "user" or "model" and its parts.
type geminiContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text             string          `json:"text"`
		FunctionResponse json.RawMessage `json:"functionResponse"`
	} `json:"parts"`
}

// thinks reports whether the model thinks: Gemini 2.5 and 3 do unless
// thinkingBudget is 0.
func (req *geminiRequest) thinks() bool {
	gc := req.GenerationConfig
	return gc == nil || gc.ThinkingConfig == nil || gc.ThinkingConfig.ThinkingBudget == nil || *gc.ThinkingConfig.ThinkingBudget != 0
}

// showsThoughts reports whether thoughts are sent as parts.
func (req *geminiRequest) showsThoughts() bool {
	gc := req.GenerationConfig
	return gc != nil && gc.ThinkingConfig != nil && gc.ThinkingConfig.IncludeThoughts
}

// inputTokens estimates the prompt's tokens as ceil(characters / 4) of
// the system instruction and every turn's text parts, at least 1: the
// same rule as the other dialects'.
func (req *geminiRequest) inputTokens() int {
	chars := 0
	turns := req.Contents
	if req.SystemInstruction != nil {
		turns = append([]geminiContent{*req.SystemInstruction}, turns...)
	}
	for _, c := range turns {
		for _, p := range c.Parts {
			chars += len([]rune(p.Text))
			if len(p.FunctionResponse) > 0 {
				chars += len([]rune(string(p.FunctionResponse)))
			}
		}
	}
	return max(1, (chars+3)/4)
}

// geminiToolCall applies the tool rule to a Gemini request: function
// declarations, toolConfig.functionCallingConfig.mode "ANY" (Gemini's
// forced call; the first of allowedFunctionNames, else the first
// declaration) or, in the ToolCallsAuto mode, no mode, AUTO or VALIDATED
// (the first declaration), and a last turn that does not carry a
// functionResponse.
func (req *geminiRequest) geminiToolCall() *toolCall {
	first := ""
	for _, t := range req.Tools {
		if len(t.FunctionDeclarations) > 0 {
			first = t.FunctionDeclarations[0].Name
			break
		}
	}
	if first == "" {
		return nil
	}
	if n := len(req.Contents); n > 0 {
		for _, p := range req.Contents[n-1].Parts {
			if len(p.FunctionResponse) > 0 {
				return nil
			}
		}
	}
	mode := ""
	var allowed []string
	if req.ToolConfig != nil && req.ToolConfig.FunctionCallingConfig != nil {
		mode = strings.ToUpper(req.ToolConfig.FunctionCallingConfig.Mode)
		allowed = req.ToolConfig.FunctionCallingConfig.AllowedFunctionNames
	}
	switch {
	case mode == "ANY":
	case req.autoTools && (mode == "" || mode == "AUTO" || mode == "VALIDATED"):
		allowed = nil // the model picks among all of them: the first
	default:
		return nil // AUTO, NONE, VALIDATED
	}
	if len(allowed) > 0 {
		return &toolCall{name: allowed[0]}
	}
	return &toolCall{name: first}
}

// geminiUsage is usageMetadata; field order is Gemini's wire order.
type geminiUsage struct {
	PromptTokenCount        int              `json:"promptTokenCount"`
	CandidatesTokenCount    int              `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount         int              `json:"totalTokenCount"`
	CachedContentTokenCount int              `json:"cachedContentTokenCount,omitempty"`
	PromptTokensDetails     []modalityTokens `json:"promptTokensDetails"`
	ThoughtsTokenCount      int              `json:"thoughtsTokenCount,omitempty"`
}

type modalityTokens struct {
	Modality   string `json:"modality"`
	TokenCount int    `json:"tokenCount"`
}

// geminiResponse is a GenerateContentResponse: the whole answer, or
// one streamed chunk.
type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata geminiUsage       `json:"usageMetadata"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

type geminiCandidate struct {
	Content      geminiOut `json:"content"`
	FinishReason string    `json:"finishReason,omitempty"`
	Index        int       `json:"index"`
}

type geminiOut struct {
	Parts []geminiPart `json:"parts"`
	Role  string       `json:"role"`
}

// geminiPart is a thought, a text or a function call part.
type geminiPart struct {
	Text             *string     `json:"text,omitempty"`
	Thought          bool        `json:"thought,omitempty"`
	FunctionCall     *geminiCall `json:"functionCall,omitempty"`
	ThoughtSignature string      `json:"thoughtSignature,omitempty"`
}

type geminiCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// geminiPlan is what one generateContent request will be answered with.
type geminiPlan struct {
	req   *geminiRequest
	model string
	n     int64
	tool  *toolCall
	input int

	// thinks: the answer has thoughts (counted in thoughtsTokenCount and
	// signed); show: they are sent as parts.
	thinks, show bool
	// thoughts and content are the pieces sent, after maxOutputTokens.
	thoughts, content []string
	finish            string
	signature         string
}

func (p *geminiPlan) responseID() string { return "gen_sim_" + strconv.FormatInt(p.n, 10) }
func (p *geminiPlan) callID() string     { return "call_sim_" + strconv.FormatInt(p.n, 10) }

// newGeminiPlan decides the answer: thoughts first, then the text or
// the function call. maxOutputTokens counts thoughts too, as Gemini's
// does: a budget the thoughts and text overrun cuts them there and
// finishes MAX_TOKENS (a function call is never cut).
func (s *Server) newGeminiPlan(req *geminiRequest, model string, n int64) *geminiPlan {
	p := &geminiPlan{
		req: req, model: model, n: n,
		tool:   req.geminiToolCall(),
		input:  req.inputTokens(),
		finish: geminiStop,
	}
	if req.thinks() && len(s.reasoning) > 0 {
		p.thinks, p.show = true, req.showsThoughts()
		p.thoughts, p.signature = s.reasoning, s.signature
	}
	if p.tool == nil {
		p.content = s.content
	}
	if gc := req.GenerationConfig; gc != nil && gc.MaxOutputTokens != nil && *gc.MaxOutputTokens > 0 {
		budget := *gc.MaxOutputTokens
		if len(p.thoughts) > budget {
			p.thoughts, p.finish = p.thoughts[:budget], geminiMaxTokens
		}
		if p.tool == nil && len(p.thoughts)+len(p.content) > budget {
			p.content, p.finish = p.content[:budget-len(p.thoughts)], geminiMaxTokens
		}
	}
	return p
}

// candidatesTokens counts the answer's tokens: one per text piece, or
// one per fragment of a function call's arguments, as the other dialects
// count them.
func (p *geminiPlan) candidatesTokens() int {
	if p.tool != nil {
		return len(ToolInputFragments)
	}
	return len(p.content)
}

// usage is the usageMetadata after thoughts thoughts and candidates
// candidate tokens have been generated.
func (p *geminiPlan) usage(thoughts, candidates int) geminiUsage {
	u := geminiUsage{
		PromptTokenCount:     p.input,
		CandidatesTokenCount: candidates,
		TotalTokenCount:      p.input + thoughts + candidates,
		PromptTokensDetails:  []modalityTokens{{"TEXT", p.input}},
		ThoughtsTokenCount:   thoughts,
	}
	if p.req.CachedContent != "" {
		u.CachedContentTokenCount = p.input / 2 // half the prompt came from the cache
	}
	return u
}

// shape is the answer's stream shape: no lead (Gemini's first chunk
// already carries the answer), the thoughts when sent, the text pieces,
// or the one chunk of a function call (a fault in tool_args trips right
// after it, before the finish: Gemini never sends half a call).
func (p *geminiPlan) shape() streamShape {
	sh := streamShape{answer: len(p.content)}
	if p.show {
		sh.reasoning = len(p.thoughts)
	}
	if p.tool != nil {
		sh.toolArgs = 1
	}
	return sh
}

// callPart is the function call part, signed when the model thinks.
func (p *geminiPlan) callPart() geminiPart {
	return geminiPart{
		FunctionCall:     &geminiCall{ID: p.callID(), Name: p.tool.name, Args: json.RawMessage(ToolInput)},
		ThoughtSignature: p.signature,
	}
}

// response wraps parts in a GenerateContentResponse.
func (p *geminiPlan) response(parts []geminiPart, finish string, u geminiUsage) geminiResponse {
	if parts == nil {
		parts = []geminiPart{}
	}
	return geminiResponse{
		Candidates:    []geminiCandidate{{Content: geminiOut{Parts: parts, Role: "model"}, FinishReason: finish}},
		UsageMetadata: u,
		ModelVersion:  p.model,
		ResponseID:    p.responseID(),
	}
}

// geminiRoute splits a Gemini method path, ".../models/{model}:{method}"
// (the model may carry a "models/" or "tunedModels/" collection), into
// the model and the method; ok is false for any other path.
func geminiRoute(path string) (model, method string, ok bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", "", false
	}
	collection := path[:i]
	model, method, ok = strings.Cut(path[i+1:], ":")
	if !ok || model == "" || !strings.HasSuffix(collection, "/models") && !strings.HasSuffix(collection, "/tunedModels") {
		return "", "", false
	}
	return model, method, true
}

// geminiListing reports whether a GET .../models (or .../models/{m})
// asks for Gemini's listing: under a v1beta path, or with a Gemini key
// (x-goog-api-key or ?key=). A bare /v1/models is OpenAI's.
func geminiListing(r *http.Request) bool {
	return strings.Contains(r.URL.Path, "/v1beta/") || r.Header.Get("x-goog-api-key") != "" || r.URL.Query().Has("key")
}

// gemini answers POST .../models/{model}:{method}. Keys
// (x-goog-api-key, ?key=, Authorization) are not checked, as on the
// other endpoints.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request, model, method string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeGeminiError(w, http.StatusMethodNotAllowed, "use POST for "+method, "")
		return
	}
	switch method {
	case geminiGenerate, geminiStream:
	case geminiCount:
		s.geminiCountTokens(w, r)
		return
	default:
		writeGeminiError(w, http.StatusNotFound, "unknown simulator method "+method, "")
		return
	}
	n := s.requests.Add(1)
	var req geminiRequest
	var err error
	if req.autoTools, err = s.autoTools(r.Header.Get(ToolCallsHeader)); err != nil {
		writeGeminiError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		writeGeminiError(w, http.StatusBadRequest, "Invalid JSON payload received. "+err.Error(), "")
		return
	}
	plan := s.newGeminiPlan(&req, model, n)
	f := s.place(s.pickFault(uint64(n)), n, plan.shape())
	switch {
	case f != nil && (f.Kind == FaultStatus || f.Kind == FaultOverloaded):
		writeGeminiFault(w, f)
		return
	case f != nil && f.Kind == FaultStall:
		err = s.stall(r)
	case method == geminiStream:
		err = s.streamGemini(w, r, plan, f, r.URL.Query().Get("alt") == "sse")
	default:
		err = s.completeGemini(w, r, plan, f)
	}
	if errors.Is(err, errDrop) || errors.Is(err, errClosed) {
		panic(http.ErrAbortHandler) // the client sees an unexpected EOF
	}
}

// completeGemini answers generateContent after TTFB: the thoughts as
// one part (when asked for), then the text, or the function call, signed.
func (s *Server) completeGemini(w http.ResponseWriter, r *http.Request, p *geminiPlan, f *Fault) error {
	if err := (waiter{r.Context()}).wait(s.cfg.TTFB); err != nil {
		return err
	}
	if f != nil && f.Kind == FaultDrop {
		return errDrop
	}
	if f != nil && f.Kind == FaultError {
		writeGeminiError(w, http.StatusInternalServerError, inBandError.Error.Message, "")
		return nil
	}
	var parts []geminiPart
	if p.show && len(p.thoughts) > 0 {
		parts = append(parts, geminiPart{Text: new(strings.Join(p.thoughts, "")), Thought: true})
	}
	if p.tool != nil {
		parts = append(parts, p.callPart())
	} else {
		parts = append(parts, geminiPart{Text: new(strings.Join(p.content, "")), ThoughtSignature: p.signature})
	}
	return writeGeminiJSON(w, p.response(parts, p.finish, p.usage(len(p.thoughts), p.candidatesTokens())))
}

// geminiCountTokens answers POST .../models/{model}:countTokens with the
// estimate generateContent reports as promptTokenCount. The body is
// {"contents":[...]} or {"generateContentRequest":{...}}. Like the
// other endpoints it counts as a request and draws a fault.
func (s *Server) geminiCountTokens(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	var body struct {
		geminiRequest
		GenerateContentRequest *geminiRequest `json:"generateContentRequest"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&body); err != nil {
		writeGeminiError(w, http.StatusBadRequest, "Invalid JSON payload received. "+err.Error(), "")
		return
	}
	req := &body.geminiRequest
	if body.GenerateContentRequest != nil {
		req = body.GenerateContentRequest
	}
	f := s.pickFault(uint64(n))
	var err error
	switch {
	case f != nil && (f.Kind == FaultStatus || f.Kind == FaultOverloaded):
		writeGeminiFault(w, f)
		return
	case f != nil && f.Kind == FaultStall:
		err = s.stall(r)
	case f != nil && f.Kind == FaultDrop:
		err = errDrop
	case f != nil && f.Kind == FaultError:
		writeGeminiError(w, http.StatusInternalServerError, inBandError.Error.Message, "")
	default:
		in := req.inputTokens()
		err = writeGeminiJSON(w, struct {
			TotalTokens         int              `json:"totalTokens"`
			PromptTokensDetails []modalityTokens `json:"promptTokensDetails"`
		}{in, []modalityTokens{{"TEXT", in}}})
	}
	if errors.Is(err, errDrop) || errors.Is(err, errClosed) {
		panic(http.ErrAbortHandler)
	}
}

// geminiModel is one entry of GET .../v1beta/models.
type geminiModel struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	Description                string   `json:"description"`
	InputTokenLimit            int      `json:"inputTokenLimit"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	Thinking                   bool     `json:"thinking"`
}

func newGeminiModel(id string) geminiModel {
	return geminiModel{
		Name: "models/" + id, Version: "001", DisplayName: id,
		Description:      "llm_simulator model",
		InputTokenLimit:  1048576,
		OutputTokenLimit: 65536,
		SupportedGenerationMethods: []string{
			geminiGenerate, geminiCount, geminiStream,
		},
		Thinking: true,
	}
}

// geminiModels answers GET .../models in Gemini's shape, and GET
// .../models/{model} with that one model (any name: the simulator
// answers every model).
func (s *Server) geminiModels(w http.ResponseWriter, one string) {
	if one != "" {
		_ = writeGeminiJSON(w, newGeminiModel(strings.TrimPrefix(one, "models/")))
		return
	}
	var list struct {
		Models []geminiModel `json:"models"`
	}
	for _, id := range s.cfg.Models {
		list.Models = append(list.Models, newGeminiModel(id))
	}
	_ = writeGeminiJSON(w, list)
}

// writeGeminiJSON writes v as a 200 JSON response. Unlike the other
// dialects it keeps Go's HTML escaping: Gemini escapes <, > and & as
// \u003c, \u003e and \u0026, and a relay must decode them.
func writeGeminiJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	return json.NewEncoder(w).Encode(v)
}
