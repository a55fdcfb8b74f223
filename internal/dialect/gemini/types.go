package gemini

import (
	"encoding/json"
	"slices"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// The Gemini API's wire types (generativelanguage v1beta), the members
// the translators read and write, in the API's member order.

// generateRequest is a generateContent / streamGenerateContent /
// countTokens request body. The model is in the path.
type generateRequest struct {
	Contents          []content         `json:"contents"`
	Tools             []toolIn          `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	SafetySettings    json.RawMessage   `json:"safetySettings,omitempty"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
	CachedContent     string            `json:"cachedContent,omitempty"`
}

// content is one turn: a role (user or model; "function" in old
// clients' tool results) and its parts.
type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

// part is any Gemini part; the members of other kinds are empty and
// omitted.
type part struct {
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	Text             *string           `json:"text,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`

	// Read to be refused: Chat cannot carry them.
	ExecutableCode      json.RawMessage `json:"executableCode,omitempty"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult,omitempty"`

	// Unknown: the part has a member none of the above reads (a kind of
	// part newer than this package). An answer's part with one is
	// refused rather than left out.
	Unknown bool `json:"-"`
}

// partMembers are the members a part is read by (as sent: exact case),
// and the metadata Gemini documents beside a part's content, which
// carries nothing of the answer.
var partMembers = []string{"thought", "thoughtSignature", "text", "inlineData", "fileData", "functionCall",
	"functionResponse", "executableCode", "codeExecutionResult", "videoMetadata", "partMetadata"}

// UnmarshalJSON decodes a part and notes whether it has a member
// partMembers does not name (one scan of its keys, no allocation).
func (p *part) UnmarshalJSON(b []byte) error {
	type plain part
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	it := jsonscan.NewObjIter(b, jsonscan.SkipWS(b, 0), 1)
	for {
		ks, ke, _, ok := it.Next()
		if !ok {
			return nil
		}
		if !slices.Contains(partMembers, string(b[ks+1:ke-1])) {
			p.Unknown = true
		}
		it.Skip()
	}
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type fileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`

	// A call whose arguments are streamed (Vertex AI, Gemini 3, with
	// toolConfig.functionCallingConfig.streamFunctionCallArguments): read
	// to be refused, as the relay never asks for it.
	PartialArgs  json.RawMessage `json:"partialArgs,omitempty"`
	WillContinue *bool           `json:"willContinue,omitempty"`
}

// streamed reports a call whose arguments come in pieces over chunks.
func (c *functionCall) streamed() bool {
	return !isNullOrAbsent(c.PartialArgs) || c.WillContinue != nil && *c.WillContinue
}

type functionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
	Parts    json.RawMessage `json:"parts,omitempty"`
}

// toolIn is one entry of tools: function declarations, or one of the
// tools Google runs itself (googleSearch, codeExecution, urlContext, …),
// which a Chat provider cannot run.
type toolIn struct {
	FunctionDeclarations []functionDeclaration      `json:"functionDeclarations,omitempty"`
	Other                map[string]json.RawMessage `json:"-"`
}

func (t *toolIn) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if fd, ok := m["functionDeclarations"]; ok {
		if err := json.Unmarshal(fd, &t.FunctionDeclarations); err != nil {
			return err
		}
		delete(m, "functionDeclarations")
	}
	t.Other = m
	return nil
}

type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	Parameters           json.RawMessage `json:"parameters,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig *functionCallingConfig `json:"functionCallingConfig,omitempty"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode,omitempty"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type generationConfig struct {
	StopSequences      []string        `json:"stopSequences,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseSchema     json.RawMessage `json:"responseSchema,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ResponseModalities []string        `json:"responseModalities,omitempty"`
	CandidateCount     *int            `json:"candidateCount,omitempty"`
	MaxOutputTokens    *int            `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	TopK               *float64        `json:"topK,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	ResponseLogprobs   *bool           `json:"responseLogprobs,omitempty"`
	Logprobs           *int            `json:"logprobs,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	IncludeThoughts *bool  `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// generateResponse is a generateContent answer, and each chunk of a
// stream.
type generateResponse struct {
	Candidates     []candidate     `json:"candidates,omitempty"`
	PromptFeedback *promptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *UsageMetadata  `json:"usageMetadata,omitempty"`
	ModelVersion   string          `json:"modelVersion,omitempty"`
	ResponseID     string          `json:"responseId,omitempty"`
}

type candidate struct {
	Content      *content `json:"content,omitempty"`
	FinishReason string   `json:"finishReason,omitempty"`
	Index        *int     `json:"index,omitempty"`
}

type promptFeedback struct {
	BlockReason string `json:"blockReason,omitempty"`
}
